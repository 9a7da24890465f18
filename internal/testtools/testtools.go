// Package testtools finds the programs a test drives (protocol servers and
// their reference clients) and decides what their absence means.
package testtools

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/claimstream/claimstream/internal/logcapture"
)

// Require returns the path of each named program. One missing skips the
// test on a machine that has only Go, or fails it when the environment
// variable env is "1" (CI sets it: a missing install is a red run, not a
// silent skip). debs names the Debian packages that provide them.
func Require(t testing.TB, env, debs string, names ...string) []string {
	t.Helper()
	paths := make([]string, len(names))
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			if os.Getenv(env) == "1" {
				t.Fatalf("%s not found and %s=1: %v (Debian packages: %s)", name, env, err, debs)
			}
			t.Skipf("%s not found (Debian packages: %s; %s=1 fails instead): %v", name, debs, env, err)
		}
		paths[i] = p
	}
	return paths
}

// Process is a program a test started with Start.
type Process struct {
	// Exited is closed once the program has exited.
	Exited <-chan struct{}
	out    *logcapture.Buffer
}

// Output is what the program wrote to its standard output and error.
func (p *Process) Output() string { return p.out.String() }

// Start starts cmd, which dies with the test binary however that ends and
// is killed when the test ends; a failed test logs its output under name.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	p := &Process{out: &logcapture.Buffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	exited := make(chan struct{})
	p.Exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Output())
		}
	})
	return p
}
