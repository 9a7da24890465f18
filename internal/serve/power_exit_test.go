package serve

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/claimstream/claimstream/internal/power/powercmd"
	"github.com/claimstream/claimstream/internal/power/proxmox/proxmoxsim"
)

const powerArgsEnv = "CLAIMSTREAM_TEST_POWER_ARGS"

// The claimstream process exits with the code of a `power` failure's
// kind, and 0 on success.
func TestPowerProcessExitCodes(t *testing.T) {
	if args := os.Getenv(powerArgsEnv); args != "" {
		// Started by this test: be `claimstream` with these arguments.
		os.Args = append([]string{"claimstream"}, strings.Split(args, "\n")...)
		runMain()
		os.Exit(0)
	}
	s := proxmoxsim.Start(t, proxmoxsim.Options{})
	vm := []string{"status", "--driver", "proxmox", "--address", strings.TrimPrefix(s.URL, "https://"), "--ca-file", s.CAFile,
		"--node", proxmoxsim.Local, "--vmid", "100", "--token-id", proxmoxsim.TokenID, "--termination-log="}
	for _, tc := range []struct {
		name  string
		args  []string
		token string
		code  int
		out   string
	}{
		{"success", vm, proxmoxsim.Secret, 0, "power status: proxmox:pve1/qemu/100 is off"},
		{"wrong token", vm, "00000000-0000-4000-8000-000000000000", powercmd.ExitWrongCredentials, "claimstream: power status: WrongCredentials: "},
		{"usage", []string{"on", "--driver", "proxmox"}, "", powercmd.ExitUsage, "claimstream: --driver proxmox needs --address"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPowerProcessExitCodes$")
		cmd.Env = append(os.Environ(), powerArgsEnv+"="+strings.Join(append([]string{"power"}, tc.args...), "\n"), powercmd.EnvToken+"="+tc.token)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if code != tc.code || !strings.HasPrefix(string(out), tc.out) {
			t.Errorf("%s: exit code %d, output %q; want %d, %q", tc.name, code, out, tc.code, tc.out)
		}
	}
}
