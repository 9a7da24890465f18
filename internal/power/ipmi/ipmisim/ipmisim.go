// Package ipmisim runs OpenIPMI's ipmi_sim for a test: a BMC on a
// loopback UDP port whose chassis power is a file, switched by the
// chassis control program the simulator runs for each power command.
package ipmisim

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/internal/freeport"
	"github.com/claimstream/claimstream/internal/testtools"
)

// The BMC's user (with the operator privilege chassis control needs).
const (
	User     = "operator1"
	Password = "s3cret-pw"
)

// BMC is a running ipmi_sim.
type BMC struct {
	Port int
	// PasswordFile holds Password, as a mounted Secret would.
	PasswordFile string
	stateFile    string
}

// Options shape the simulated machine.
type Options struct {
	// IgnoreSoft: the chassis accepts a soft shutdown and does nothing,
	// as a machine whose operating system ignores the ACPI power button.
	IgnoreSoft bool
	// Port is the UDP port it serves on; 0 picks a free one. A test that
	// writes the BMC's address before it starts the BMC sets it.
	Port int
}

// Require skips the test when ipmi_sim or ipmitool is missing, or fails
// it under CLAIMSTREAM_REQUIRE_IPMI_SIM=1, and returns their paths.
func Require(t testing.TB) (sim, tool string) {
	t.Helper()
	p := testtools.Require(t, "CLAIMSTREAM_REQUIRE_IPMI_SIM", "openipmi, ipmitool", "ipmi_sim", "ipmitool")
	return p[0], p[1]
}

// Start starts ipmi_sim on 127.0.0.1, the chassis off, and kills it when
// the test ends. ready answers whether the BMC serves requests yet (a
// chassis status through the client under test); Start returns once it
// does.
func Start(t testing.TB, o Options, ready func(ctx context.Context, port int) error) *BMC {
	t.Helper()
	sim, _ := Require(t)
	dir := t.TempDir()
	port := o.Port
	if port == 0 {
		ports, err := freeport.Ports(1)
		if err != nil {
			t.Fatal(err)
		}
		port = ports[0]
	}
	b := &BMC{Port: port, stateFile: filepath.Join(dir, "power"), PasswordFile: filepath.Join(dir, "password")}
	soft := `echo 0 > "$state"`
	if o.IgnoreSoft {
		soft = ":"
	}
	// ipmi_sim runs "<prog> get power" (and reads "power:<0|1>") and
	// "<prog> set power <0|1>" or "<prog> set shutdown 1" (a soft off).
	script := `#!/bin/sh
state=` + strconv.Quote(b.stateFile) + `
op=$1; shift
case $op in
get) for p in "$@"; do [ "$p" = power ] && echo "power:$(cat "$state")"; done ;;
set) while [ $# -ge 2 ]; do
	case $1 in
	power) echo "$2" > "$state" ;;
	shutdown) [ "$2" = 1 ] && ` + soft + ` ;;
	esac
	shift 2
done ;;
esac
`
	write(t, filepath.Join(dir, "chassis"), script, 0o755)
	write(t, b.stateFile, "0\n", 0o644)
	write(t, b.PasswordFile, Password, 0o600)
	write(t, filepath.Join(dir, "lan.conf"), fmt.Sprintf(`name "testbmc"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback md5
    allowed_auths_user md5
    allowed_auths_operator md5
    allowed_auths_admin md5
    guid a123456789abcdefa123456789abcdef
  endlan
  user 2 true "%s" "%s" operator 10 md5
  chassis_control "%s"
`, b.Port, User, Password, filepath.Join(dir, "chassis")), 0o644)
	write(t, filepath.Join(dir, "bmc.emu"), "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\nmc_enable 0x20\n", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sim, "-n", "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "bmc.emu"), "-s", filepath.Join(dir, "state"))
	proc := testtools.Start(t, "ipmi_sim", cmd)
	// ipmi_sim binds its port a moment after it starts.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(15 * time.Second)
	for {
		err := ready(context.Background(), b.Port)
		if err == nil {
			return b
		}
		select {
		case <-proc.Exited:
			t.Fatalf("ipmi_sim exited: %s", proc.Output())
		case <-limit:
			t.Fatalf("ipmi_sim never answered on 127.0.0.1:%d: %v", b.Port, err)
		case <-tick.C:
		}
	}
}

func write(t testing.TB, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

// Ipmitool is ipmitool's own reading of the chassis ("Chassis Power is
// on"): the cross-check that the simulated machine changed state, seen by
// another client.
func (b *BMC) Ipmitool(t testing.TB) string {
	t.Helper()
	_, tool := Require(t)
	out, err := exec.Command(tool, "-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(b.Port), "-U", User, "-f", b.PasswordFile, "-L", "OPERATOR", "-C", "3", "chassis", "power", "status").Output()
	if err != nil {
		t.Fatalf("ipmitool chassis power status: %v", err)
	}
	return strings.TrimSpace(string(out))
}
