package testenv

import "syscall"

func sysProcAttr() *syscall.SysProcAttr {
	// Own process group (stopped by group id); SIGKILL if the test binary
	// dies without cleaning up (a panic on test timeout, kill -9).
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
