package libvirt

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/claimstream/claimstream/internal/power"
	"github.com/claimstream/claimstream/internal/power/libvirt/libvirtd"
)

func driver(d *libvirtd.Daemon) *Driver {
	return &Driver{Address: d.Socket, URI: libvirtd.URI, Domain: libvirtd.Domain, Timeout: 5 * time.Second}
}

var opts = power.Options{Timeout: 20 * time.Second, Interval: 50 * time.Millisecond}

func TestDaemonShutdownCreateDestroy(t *testing.T) {
	lv := libvirtd.Start(t, libvirtd.Options{})
	ctx := context.Background()
	d := driver(lv)

	r, err := d.Status(ctx)
	if err != nil || r.State != power.On || r.ID != "libvirt:test@"+lv.Socket {
		t.Fatalf("status before: %+v, %v; want the test domain on, under its daemon's socket", r, err)
	}
	out, err := power.Wait(ctx, d, power.On, opts)
	if err != nil || !out.Already {
		t.Fatalf("on when running: %+v, %v; want success, already on", out, err)
	}
	out, err = power.Wait(ctx, d, power.Off, opts) // shutdown
	if err != nil || out.Already || out.Reading.State != power.Off {
		t.Fatalf("shutdown: %+v, %v", out, err)
	}
	if got := lv.Domstate(t); got != "shut off" {
		t.Fatalf("virsh after shutdown: %q", got)
	}
	out, err = power.Wait(ctx, d, power.Off, opts)
	if err != nil || !out.Already {
		t.Fatalf("off when shut off: %+v, %v; want success, already off", out, err)
	}
	out, err = power.Wait(ctx, d, power.On, opts) // create
	if err != nil || out.Already || out.Reading.State != power.On {
		t.Fatalf("create: %+v, %v", out, err)
	}
	if got := lv.Domstate(t); got != "running" {
		t.Fatalf("virsh after create: %q", got)
	}
	d.Force = true
	out, err = power.Wait(ctx, d, power.Off, opts) // destroy
	if err != nil || out.Reading.State != power.Off {
		t.Fatalf("destroy: %+v, %v", out, err)
	}
	if got := lv.Domstate(t); got != "shut off" {
		t.Fatalf("virsh after destroy: %q", got)
	}
}

func TestDaemonNoSuchDomain(t *testing.T) {
	lv := libvirtd.Start(t, libvirtd.Options{})
	d := driver(lv)
	d.Domain = "no-such-vm"
	_, err := d.Status(context.Background())
	if err == nil || power.Reason(err) != "Failed" {
		t.Fatalf("unknown domain: %v; want a plain failure", err)
	}
	for _, want := range []string{`no domain "no-such-vm"`, lv.Socket, libvirtd.URI} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

func TestDaemonAsksForSASL(t *testing.T) {
	lv := libvirtd.Start(t, libvirtd.Options{SASL: true})
	_, err := driver(lv).Status(context.Background())
	if !errors.Is(err, power.ErrCredentials) || power.Reason(err) != "WrongCredentials" {
		t.Fatalf("SASL socket: %v; want wrong credentials", err)
	}
	if !strings.Contains(err.Error(), "the libvirt daemon at "+lv.Socket+" refused this client") {
		t.Errorf("error %q does not name the socket", err)
	}
}

func TestUnreachableDaemon(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "libvirt-sock")
	d := &Driver{Address: sock, URI: libvirtd.URI, Domain: libvirtd.Domain, Timeout: time.Second}
	_, err := d.Status(context.Background())
	if !errors.Is(err, power.ErrUnreachable) || power.Reason(err) != "Unreachable" {
		t.Fatalf("no socket: %v; want unreachable", err)
	}
	if !strings.Contains(err.Error(), "no libvirt daemon answered at "+sock) {
		t.Errorf("error %q does not name the socket", err)
	}
	// A socket file nobody listens on any more.
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.On(context.Background()); !errors.Is(err, power.ErrUnreachable) {
		t.Fatalf("on, not a socket: %v; want unreachable", err)
	}
	tcp := &Driver{Address: "127.0.0.1:1", Domain: "vm", Timeout: time.Second}
	if _, err := tcp.Status(context.Background()); !errors.Is(err, power.ErrUnreachable) {
		t.Fatalf("tcp, nothing listening: %v; want unreachable", err)
	}
}

func TestState(t *testing.T) {
	for s, want := range map[golibvirt.DomainState]power.PowerState{
		golibvirt.DomainNostate:     power.Unknown,
		golibvirt.DomainRunning:     power.On,
		golibvirt.DomainBlocked:     power.On,
		golibvirt.DomainPaused:      power.On,
		golibvirt.DomainShutdown:    power.On,
		golibvirt.DomainShutoff:     power.Off,
		golibvirt.DomainCrashed:     power.Off,
		golibvirt.DomainPmsuspended: power.On,
		42:                          power.Unknown,
	} {
		if got := State(s); got != want {
			t.Errorf("State(%d) = %s, want %s", s, got, want)
		}
	}
}
