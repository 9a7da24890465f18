package suite

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoListenerOutsideLoopback: every TCP socket that a process of the
// suite listens on is bound to 127.0.0.1 (or ::1).
func TestNoListenerOutsideLoopback(t *testing.T) {
	listening := map[string]string{} // inode -> local address
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			t.Skipf("no %s: %v", f, err)
		}
		sc := bufio.NewScanner(fh)
		sc.Scan() // header
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != "0A" { // 0A = LISTEN
				continue
			}
			listening[fs[9]] = fs[1]
		}
		fh.Close()
	}
	pids := map[int]string{}
	for _, p := range env.Processes() {
		pids[p.Pid()] = p.Name
	}
	if server.proc != nil {
		pids[server.proc.Pid()] = server.proc.Name
	}
	checked := 0
	for pid, name := range pids {
		fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			inode := strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")
			addr, ok := listening[inode]
			if !ok {
				continue
			}
			checked++
			host := strings.SplitN(addr, ":", 2)[0]
			switch host {
			case "0100007F", "00000000000000000000000001000000": // 127.0.0.1, ::1
			default:
				t.Errorf("%s (pid %d) listens on %s (hex), not loopback", name, pid, addr)
			}
		}
	}
	t.Logf("%d listening sockets of %d processes, all on loopback", checked, len(pids))
	if checked == 0 {
		t.Error("found no listening socket at all: the check is broken")
	}
}
