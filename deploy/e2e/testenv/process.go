package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Process is a child started in its own process group, so that it and
// whatever it starts are stopped together by the group id. On Linux the
// child also gets SIGKILL if the test process dies (Pdeathsig).
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
	mu      sync.Mutex
	stopped bool
}

// StartProcess starts bin with args, stdout and stderr appended to
// logDir/<name>.log.
func StartProcess(name, bin string, args []string, logDir string, env []string) (*Process, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== %s %s %v\n", time.Now().Format(time.RFC3339Nano), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout = f
	cmd.Stderr = f
	if env != nil {
		cmd.Env = env
	}
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	register(p)
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process id (and process group id).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited, and its error.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs
// the group, and waits for the exit.
func (p *Process) Stop(grace time.Duration) {
	defer unregister(p)
	select {
	case <-p.done:
		killGroup(p.Pid(), syscall.SIGKILL) // stray children of an exited leader
		return
	default:
	}
	_ = killGroup(p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = killGroup(p.Pid(), syscall.SIGKILL)
		<-p.done
	}
	killGroup(p.Pid(), syscall.SIGKILL)
}

// Kill sends SIGKILL to the process group (kill -9) and waits for the exit.
func (p *Process) Kill() {
	defer unregister(p)
	_ = killGroup(p.Pid(), syscall.SIGKILL)
	<-p.done
}

func killGroup(pid int, sig syscall.Signal) error {
	err := syscall.Kill(-pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

var (
	liveMu sync.Mutex
	live   = map[*Process]struct{}{}
)

func register(p *Process) {
	liveMu.Lock()
	live[p] = struct{}{}
	liveMu.Unlock()
}

func unregister(p *Process) {
	liveMu.Lock()
	delete(live, p)
	liveMu.Unlock()
}

// KillAll SIGKILLs the process group of every process this package started
// that has not been stopped yet. Tests call it from TestMain's last defer and
// from their timeout and signal handlers.
func KillAll() {
	liveMu.Lock()
	ps := make([]*Process, 0, len(live))
	for p := range live {
		ps = append(ps, p)
	}
	liveMu.Unlock()
	for _, p := range ps {
		_ = killGroup(p.Pid(), syscall.SIGKILL)
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
		unregister(p)
	}
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// KubeconfigToken renders a kubeconfig that authenticates with a bearer token.
func KubeconfigToken(host string, caPEM []byte, user, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: e2e
  context: {cluster: e2e, user: %s}
current-context: e2e
`, host, b64(caPEM), user, token, user)
}
