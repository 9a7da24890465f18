// Package libvirtd runs a private libvirtd for a test: a session daemon
// whose unix socket lives in a temporary directory and takes clients
// without authentication, serving libvirt's test driver (test:///default,
// its one domain "test" running).
package libvirtd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"

	"github.com/claimstream/claimstream/internal/testtools"
)

// URI is the test driver, and Domain its default domain.
const (
	URI    = "test:///default"
	Domain = "test"
)

// nobody is the user the daemon runs as when the test runs as root: a
// root libvirtd is the system instance, which reads /etc/libvirt and
// wants the qemu user; a session daemon needs neither.
const nobody = 65534

// Daemon is a running libvirtd.
type Daemon struct {
	// Socket is the read-write unix socket.
	Socket string
}

// Require skips the test when libvirtd or virsh is missing, or fails it
// under CLAIMSTREAM_REQUIRE_LIBVIRTD=1, and returns their paths.
func Require(t testing.TB) (daemon, virsh string) {
	t.Helper()
	p := testtools.Require(t, "CLAIMSTREAM_REQUIRE_LIBVIRTD", "libvirt-daemon, libvirt-clients", "libvirtd", "virsh")
	return p[0], p[1]
}

// Options shape the daemon.
type Options struct {
	// SASL: the socket asks clients for SASL authentication, which a
	// client without credentials cannot pass.
	SASL bool
}

// Start starts libvirtd and returns once its socket answers. It holds
// one connection to the test driver until the test ends, because the
// driver's state lasts only while a connection is open; the daemon is
// killed when the test ends.
func Start(t testing.TB, o Options) *Daemon {
	t.Helper()
	bin, _ := Require(t)
	// Not t.TempDir: the daemon may run as another user, who needs to
	// reach the directory, and a unix socket's path is short.
	dir, err := os.MkdirTemp("", "libvirtd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &Daemon{Socket: filepath.Join(dir, "run", "libvirt-sock")}
	conf := filepath.Join(dir, "libvirtd.conf")
	auth := "none"
	if o.SASL {
		auth = "sasl"
	}
	write(t, conf, fmt.Sprintf(`listen_tls = 0
listen_tcp = 0
unix_sock_dir = %q
unix_sock_rw_perms = "0777"
auth_unix_ro = %q
auth_unix_rw = %q
`, filepath.Dir(d.Socket), auth, auth))
	cmd := exec.Command(bin, "-f", conf, "-p", filepath.Join(dir, "home", "libvirtd.pid"))
	home := filepath.Join(dir, "home")
	for _, sub := range []string{"run", "home"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_RUNTIME_DIR="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home, "XDG_DATA_HOME="+home)
	if os.Geteuid() == 0 {
		for _, p := range []string{dir, filepath.Join(dir, "run"), home} {
			if err := os.Chown(p, nobody, nobody); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Chmod(conf, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	}
	proc := testtools.Start(t, "libvirtd", cmd)
	// libvirtd creates its socket once its drivers are loaded.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(30 * time.Second)
	for {
		l := golibvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(d.Socket), dialers.WithLocalTimeout(time.Second)))
		err := l.ConnectToURI(URI)
		if err == nil {
			t.Cleanup(func() { l.Disconnect() })
			return d
		}
		var refused golibvirt.Error
		if o.SASL && errors.As(err, &refused) {
			return d
		}
		select {
		case <-proc.Exited:
			t.Fatalf("libvirtd exited: %s", proc.Output())
		case <-limit:
			t.Fatalf("libvirtd never served %s on %s: %v", URI, d.Socket, err)
		case <-tick.C:
		}
	}
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Domstate is virsh's own reading of the test domain ("running", "shut
// off"): the cross-check that the domain changed state, seen by another
// client.
func (d *Daemon) Domstate(t testing.TB) string {
	t.Helper()
	_, virsh := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, virsh, "-c", "test+unix:///default?socket="+d.Socket, "domstate", Domain).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh domstate: %v: %s", err, out)
	}
	return strings.TrimSpace(string(out))
}
