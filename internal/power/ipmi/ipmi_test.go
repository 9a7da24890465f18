package ipmi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/internal/freeport"
	"github.com/claimstream/claimstream/internal/power"
)

const (
	simUser     = "operator1"
	simPassword = "s3cret-pw"
)

// bmc is an OpenIPMI ipmi_sim started for one test: a BMC on a loopback
// UDP port whose chassis power is a file, switched by the chassis control
// program the simulator runs for each power command.
type bmc struct {
	port      int
	stateFile string
	passFile  string
}

// startSim starts ipmi_sim. ignoreSoft: the chassis accepts a soft
// shutdown and does nothing, as a machine whose operating system ignores
// the ACPI power button.
func startSim(t *testing.T, ignoreSoft bool) *bmc {
	t.Helper()
	sim, err := exec.LookPath("ipmi_sim")
	if err != nil {
		if os.Getenv("CLAIMSTREAM_REQUIRE_IPMI_SIM") == "1" {
			t.Fatalf("ipmi_sim not found and CLAIMSTREAM_REQUIRE_IPMI_SIM=1: %v (Debian package openipmi)", err)
		}
		t.Skipf("ipmi_sim not found (Debian package openipmi; set CLAIMSTREAM_REQUIRE_IPMI_SIM=1 to fail instead): %v", err)
	}
	dir := t.TempDir()
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	b := &bmc{port: ports[0], stateFile: filepath.Join(dir, "power"), passFile: filepath.Join(dir, "password")}
	soft := `echo 0 > "$state"`
	if ignoreSoft {
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
	write(t, b.passFile, simPassword, 0o600)
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
`, b.port, simUser, simPassword, filepath.Join(dir, "chassis")), 0o644)
	write(t, filepath.Join(dir, "bmc.emu"), "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\nmc_enable 0x20\n", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sim, "-n", "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "bmc.emu"), "-s", filepath.Join(dir, "state"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("ipmi_sim output:\n%s", out.String())
		}
	})
	// Ready once it answers a chassis status; it binds its port a moment
	// after it starts.
	d := b.driver(simPassword)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	limit := time.After(15 * time.Second)
	for {
		_, err := d.Status(context.Background())
		if err == nil {
			return b
		}
		select {
		case <-exited:
			t.Fatalf("ipmi_sim exited: %s", out.String())
		case <-limit:
			t.Fatalf("ipmi_sim never answered on 127.0.0.1:%d: %v", b.port, err)
		case <-tick.C:
		}
	}
}

func write(t *testing.T, path, text string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), mode); err != nil {
		t.Fatal(err)
	}
}

// driver uses cipher suite 3, the one ipmi_sim implements: the
// simulator does not answer Get Channel Cipher Suites, so a negotiating
// client waits out that request first.
func (b *bmc) driver(password string) *Driver {
	return &Driver{Host: "127.0.0.1", Port: b.port, Username: simUser, Password: password, CipherSuite: 3, Timeout: time.Second}
}

// ipmitool is ipmitool's own reading of the chassis: the cross-check that
// the simulated machine changed state, seen by another client.
func (b *bmc) ipmitool(t *testing.T) string {
	t.Helper()
	tool, err := exec.LookPath("ipmitool")
	if err != nil {
		if os.Getenv("CLAIMSTREAM_REQUIRE_IPMI_SIM") == "1" {
			t.Fatalf("ipmitool not found: %v", err)
		}
		t.Skipf("ipmitool not found (Debian package ipmitool): %v", err)
	}
	out, err := exec.Command(tool, "-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(b.port), "-U", simUser, "-f", b.passFile, "-L", "OPERATOR", "-C", "3", "chassis", "power", "status").Output()
	if err != nil {
		t.Fatalf("ipmitool chassis power status: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func TestSimOnSoftOffHardOff(t *testing.T) {
	b := startSim(t, false)
	ctx := context.Background()
	d := b.driver(simPassword)
	opts := power.Options{Timeout: 20 * time.Second, Interval: 100 * time.Millisecond}

	negotiating := b.driver(simPassword)
	negotiating.CipherSuite = 0
	r, err := negotiating.Status(ctx)
	if err != nil || r.State != power.Off || r.ID != "ipmi:127.0.0.1:"+strconv.Itoa(b.port) {
		t.Fatalf("status before: %+v, %v; want off under the BMC's address", r, err)
	}
	out, err := power.Wait(ctx, d, power.On, opts)
	if err != nil || out.Already || out.Reading.State != power.On {
		t.Fatalf("on: %+v, %v", out, err)
	}
	if got := b.ipmitool(t); got != "Chassis Power is on" {
		t.Fatalf("ipmitool after on: %q", got)
	}
	out, err = power.Wait(ctx, d, power.On, opts)
	if err != nil || !out.Already {
		t.Fatalf("on when on: %+v, %v; want success, already on", out, err)
	}
	out, err = power.Wait(ctx, d, power.Off, opts) // soft
	if err != nil || out.Already || out.Reading.State != power.Off {
		t.Fatalf("soft off: %+v, %v", out, err)
	}
	if got := b.ipmitool(t); got != "Chassis Power is off" {
		t.Fatalf("ipmitool after soft off: %q", got)
	}
	if _, err := power.Wait(ctx, d, power.On, opts); err != nil {
		t.Fatal(err)
	}
	d.Hard = true
	out, err = power.Wait(ctx, d, power.Off, opts)
	if err != nil || out.Reading.State != power.Off {
		t.Fatalf("hard off: %+v, %v", out, err)
	}
	if got := b.ipmitool(t); got != "Chassis Power is off" {
		t.Fatalf("ipmitool after hard off: %q", got)
	}
}

func TestSimSoftOffIgnoredNeverReachesOff(t *testing.T) {
	b := startSim(t, true)
	ctx := context.Background()
	d := b.driver(simPassword)
	if _, err := power.Wait(ctx, d, power.On, power.Options{Timeout: 20 * time.Second, Interval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	_, err := power.Wait(ctx, d, power.Off, power.Options{Timeout: 800 * time.Millisecond, Interval: 100 * time.Millisecond})
	if !errors.Is(err, power.ErrNotReached) || power.Reason(err) != "StateNotReached" {
		t.Fatalf("soft off ignored: %v; want never reached the state", err)
	}
	if !strings.Contains(err.Error(), "was still on") {
		t.Fatalf("error %q does not say the machine stayed on", err)
	}
	if got := b.ipmitool(t); got != "Chassis Power is on" {
		t.Fatalf("ipmitool: %q; the chassis should have stayed on", got)
	}
}

func TestSimWrongPassword(t *testing.T) {
	b := startSim(t, false)
	_, err := b.driver("not-the-password").Status(context.Background())
	if !errors.Is(err, power.ErrCredentials) {
		t.Fatalf("wrong password: %v; want wrong credentials", err)
	}
	t.Log(err)
	for _, want := range []string{"wrong credentials", simUser, "127.0.0.1:" + strconv.Itoa(b.port)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "not-the-password") {
		t.Errorf("error %q quotes the password", err)
	}
}

func TestUnreachableBMC(t *testing.T) {
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{Host: "127.0.0.1", Port: ports[0], Username: simUser, Password: simPassword, Timeout: 200 * time.Millisecond}
	_, err = d.Status(context.Background())
	if !errors.Is(err, power.ErrUnreachable) || power.Reason(err) != "Unreachable" {
		t.Fatalf("nothing listening: %v; want unreachable", err)
	}
	if !strings.Contains(err.Error(), "no BMC answered at ipmi:127.0.0.1:"+strconv.Itoa(ports[0])) {
		t.Errorf("error %q does not name the address", err)
	}
	if err := d.On(context.Background()); !errors.Is(err, power.ErrUnreachable) {
		t.Fatalf("on, nothing listening: %v; want unreachable", err)
	}
}
