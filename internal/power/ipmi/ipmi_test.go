package ipmi

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/internal/freeport"
	"github.com/claimstream/claimstream/internal/power"
	"github.com/claimstream/claimstream/internal/power/ipmi/ipmisim"
)

const (
	simUser     = ipmisim.User
	simPassword = ipmisim.Password
)

// startSim starts ipmi_sim, ready once the driver reads its chassis.
func startSim(t *testing.T, ignoreSoft bool) *bmc {
	t.Helper()
	s := ipmisim.Start(t, ipmisim.Options{IgnoreSoft: ignoreSoft}, func(ctx context.Context, port int) error {
		_, err := (&bmc{BMC: &ipmisim.BMC{Port: port}}).driver(simPassword).Status(ctx)
		return err
	})
	return &bmc{BMC: s}
}

type bmc struct{ *ipmisim.BMC }

// driver uses cipher suite 3, the one ipmi_sim implements: the
// simulator does not answer Get Channel Cipher Suites, so a negotiating
// client waits out that request first.
func (b *bmc) driver(password string) *Driver {
	return &Driver{Host: "127.0.0.1", Port: b.Port, Username: simUser, Password: password, CipherSuite: 3, Timeout: time.Second}
}

func TestSimOnSoftOffHardOff(t *testing.T) {
	b := startSim(t, false)
	ctx := context.Background()
	d := b.driver(simPassword)
	opts := power.Options{Timeout: 20 * time.Second, Interval: 100 * time.Millisecond}

	negotiating := b.driver(simPassword)
	negotiating.CipherSuite = 0
	r, err := negotiating.Status(ctx)
	if err != nil || r.State != power.Off || r.ID != "ipmi:127.0.0.1:"+strconv.Itoa(b.Port) {
		t.Fatalf("status before: %+v, %v; want off under the BMC's address", r, err)
	}
	out, err := power.Wait(ctx, d, power.On, opts)
	if err != nil || out.Already || out.Reading.State != power.On {
		t.Fatalf("on: %+v, %v", out, err)
	}
	if got := b.Ipmitool(t); got != "Chassis Power is on" {
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
	if got := b.Ipmitool(t); got != "Chassis Power is off" {
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
	if got := b.Ipmitool(t); got != "Chassis Power is off" {
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
	if got := b.Ipmitool(t); got != "Chassis Power is on" {
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
	for _, want := range []string{"wrong credentials", simUser, "127.0.0.1:" + strconv.Itoa(b.Port)} {
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
