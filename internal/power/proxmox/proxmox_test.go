package proxmox

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/internal/freeport"
	"github.com/claimstream/claimstream/internal/power"
	"github.com/claimstream/claimstream/internal/power/proxmox/proxmoxsim"
)

func caPool(t *testing.T, s *proxmoxsim.Server) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(b) {
		t.Fatal("CA file holds no certificate")
	}
	return p
}

func guest(t *testing.T, s *proxmoxsim.Server, kind string, vmid int) *Driver {
	t.Helper()
	return &Driver{Endpoint: s.URL, Node: proxmoxsim.Local, VMID: vmid, Kind: kind,
		TokenID: proxmoxsim.TokenID, Secret: proxmoxsim.Secret, RootCAs: caPool(t, s), Timeout: 2 * time.Second}
}

func node(t *testing.T, s *proxmoxsim.Server, name string) *Driver {
	t.Helper()
	d := guest(t, s, "", 0)
	d.Node = name
	return d
}

// wait runs power.Wait on a fake clock, stepping it by the interval
// whenever Wait waits on it, so that the machine's boot takes no time.
func wait(t *testing.T, d power.Driver, want power.PowerState, timeout time.Duration) (power.Outcome, error) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	type res struct {
		out power.Outcome
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := power.Wait(context.Background(), d, want, power.Options{Timeout: timeout, Interval: time.Second, Clock: fc})
		done <- res{out, err}
	}()
	for {
		select {
		case r := <-done:
			return r.out, r.err
		default:
		}
		if fc.HasWaiters() {
			fc.Step(time.Second)
		}
		runtime.Gosched()
	}
}

// noSecret fails the test when err's text holds the token's secret.
func noSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), proxmoxsim.Secret) {
		t.Fatalf("error %q quotes the token's secret", err)
	}
}

func TestVMStartShutdownStop(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{BootReads: 2})
	ctx := context.Background()
	d := guest(t, s, "", proxmoxsim.VMID)
	vm := "/api2/json/nodes/pve1/qemu/100/status/"

	r, err := d.Status(ctx)
	if err != nil || r.State != power.Off || r.ID != "proxmox:pve1/qemu/100" {
		t.Fatalf("status before: %+v, %v; want off, named proxmox:pve1/qemu/100", r, err)
	}
	out, err := wait(t, d, power.On, time.Minute)
	if err != nil || out.Already || out.Reading.State != power.On || out.Took < 2*time.Second || !s.Running(QEMU, proxmoxsim.VMID) {
		t.Fatalf("on: %+v, %v; want on after the boot's two reads", out, err)
	}
	out, err = wait(t, d, power.On, time.Minute)
	if err != nil || !out.Already {
		t.Fatalf("on when on: %+v, %v; want success, already on", out, err)
	}
	if out, err = wait(t, d, power.Off, time.Minute); err != nil || out.Reading.State != power.Off || s.Running(QEMU, proxmoxsim.VMID) {
		t.Fatalf("shutdown: %+v, %v", out, err)
	}
	if _, err := wait(t, d, power.On, time.Minute); err != nil {
		t.Fatal(err)
	}
	d.Hard = true
	if out, err = wait(t, d, power.Off, time.Minute); err != nil || out.Reading.State != power.Off {
		t.Fatalf("stop: %+v, %v", out, err)
	}
	want := []string{"POST " + vm + "start", "POST " + vm + "shutdown", "POST " + vm + "start", "POST " + vm + "stop"}
	if got := s.Actions(); !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v (nothing for an already-on VM, no forceStop)", got, want)
	}
}

func TestContainer(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{})
	d := guest(t, s, LXC, proxmoxsim.CTID)
	if out, err := wait(t, d, power.On, time.Minute); err != nil || out.Reading.ID != "proxmox:pve1/lxc/200" || !s.Running(LXC, proxmoxsim.CTID) {
		t.Fatalf("on: %+v, %v", out, err)
	}
	if _, err := wait(t, d, power.Off, time.Minute); err != nil || s.Running(LXC, proxmoxsim.CTID) {
		t.Fatalf("off: %v", err)
	}
	if s.Running(QEMU, proxmoxsim.VMID) {
		t.Fatal("the VM of the same ID space started")
	}
}

func TestNodeWakeAndShutdown(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{BootReads: 3})
	d := node(t, s, proxmoxsim.Sleeper)
	r, err := d.Status(context.Background())
	if err != nil || r.State != power.Off || r.ID != "proxmox:node/pve2" {
		t.Fatalf("status before: %+v, %v; want off, named proxmox:node/pve2", r, err)
	}
	out, err := wait(t, d, power.On, time.Minute)
	if err != nil || out.Already || out.Reading.State != power.On || out.Took < 3*time.Second {
		t.Fatalf("wake: %+v, %v; want online after the boot's three reads", out, err)
	}
	if out, err = wait(t, d, power.On, time.Minute); err != nil || !out.Already {
		t.Fatalf("wake when online: %+v, %v", out, err)
	}
	hard := *d
	hard.Hard = true
	if _, err := wait(t, &hard, power.Off, time.Minute); !errors.Is(err, power.ErrUnsupported) || !strings.Contains(err.Error(), "no hard power-off for a node") {
		t.Fatalf("hard off of a node: %v; want unsupported", err)
	}
	if out, err = wait(t, d, power.Off, time.Minute); err != nil || out.Reading.State != power.Off || s.Online(proxmoxsim.Sleeper) {
		t.Fatalf("shutdown: %+v, %v", out, err)
	}
	want := []string{"POST /api2/json/nodes/pve2/wakeonlan", "POST /api2/json/nodes/pve2/status command=shutdown"}
	if got := s.Actions(); !slices.Equal(got, want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
}

// The API wakes a node from the member that answers: never itself.
func TestWakeTheAnsweringNode(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{})
	err := node(t, s, proxmoxsim.Local).On(context.Background())
	if err == nil || power.Reason(err) != "Failed" || !strings.Contains(err.Error(), "HTTP 500 from the Proxmox API at "+s.Listener.Addr().String()+" on POST /nodes/pve1/wakeonlan: 'pve1' is local node, cannot wake my self!") {
		t.Fatalf("waking the answering node: %v", err)
	}
	_, err = node(t, s, "pve9").Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), `no node "pve9" in the cluster of the Proxmox API at `) || !strings.Contains(err.Error(), "(its nodes: pve1, pve2)") {
		t.Fatalf("unknown node: %v", err)
	}
}

func TestUnknownGuest(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{})
	_, err := guest(t, s, "", 999).Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "HTTP 500 from the Proxmox API at ") || !strings.Contains(err.Error(), "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist") {
		t.Fatalf("unknown VM: %v; want the API's message", err)
	}
}

func TestVMNeverStarts(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{NeverStart: true})
	out, err := wait(t, guest(t, s, "", proxmoxsim.VMID), power.On, 30*time.Second)
	if !errors.Is(err, power.ErrNotReached) || power.Reason(err) != "StateNotReached" || !strings.Contains(err.Error(), "proxmox:pve1/qemu/100 was still off 30s after asking for on") {
		t.Fatalf("a VM that never starts: %+v, %v", out, err)
	}
	if out.Took != 30*time.Second {
		t.Fatalf("gave up after %s, want the 30s timeout", out.Took)
	}
}

// A start task Proxmox accepts and then fails ends the wait at the next
// look, with the task's exit status, instead of at the timeout.
func TestFailedStartTaskEndsTheWait(t *testing.T) {
	const why = "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"
	s := proxmoxsim.Start(t, proxmoxsim.Options{FailStart: why})
	out, err := wait(t, guest(t, s, "", proxmoxsim.VMID), power.On, 30*time.Second)
	if !errors.Is(err, power.ErrNotReached) || power.Reason(err) != "StateNotReached" {
		t.Fatalf("a failed start task: %+v, %v; want StateNotReached", out, err)
	}
	for _, want := range []string{"the Proxmox task to start proxmox:pve1/qemu/100", "UPID:pve1:", why} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if out.Took >= 30*time.Second {
		t.Fatalf("gave up after %s, at the timeout; want at the first look after the task ended", out.Took)
	}
	if s.Running(QEMU, proxmoxsim.VMID) {
		t.Fatal("the guest runs after its start task failed")
	}
}

func TestShutdownIgnored(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{IgnoreShutdown: true})
	s.SetRunning(QEMU, proxmoxsim.VMID, true)
	_, err := wait(t, guest(t, s, "", proxmoxsim.VMID), power.Off, 10*time.Second)
	if !errors.Is(err, power.ErrNotReached) || !strings.Contains(err.Error(), "was still on") {
		t.Fatalf("shutdown ignored: %v; want never reached the state", err)
	}
}

func TestWrongToken(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{})
	for _, d := range []*Driver{guest(t, s, "", proxmoxsim.VMID), node(t, s, proxmoxsim.Sleeper)} {
		d.Secret = "00000000-0000-4000-8000-000000000000"
		_, err := wait(t, d, power.On, time.Minute)
		if !errors.Is(err, power.ErrCredentials) || power.Reason(err) != "WrongCredentials" {
			t.Fatalf("%s, wrong secret: %v; want wrong credentials", d.ID(), err)
		}
		if !strings.Contains(err.Error(), `refused the API token "`+proxmoxsim.TokenID+`" (HTTP 401 on GET `) {
			t.Errorf("error %q does not name the token and the refusal", err)
		}
		if strings.Contains(err.Error(), d.Secret) {
			t.Errorf("error %q quotes the secret", err)
		}
	}
	if len(s.Actions()) != 0 {
		t.Fatalf("acted with a wrong token: %v", s.Actions())
	}
}

func TestTokenWithoutPowerMgmt(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{NoPowerMgmt: true})
	_, err := wait(t, guest(t, s, "", proxmoxsim.VMID), power.On, time.Minute)
	if !errors.Is(err, power.ErrCredentials) || !strings.Contains(err.Error(), "it needs VM.PowerMgmt and VM.Audit on /vms/100") ||
		!strings.Contains(err.Error(), "Permission check failed (/vms/100, VM.PowerMgmt)") {
		t.Fatalf("no VM.PowerMgmt: %v", err)
	}
	noSecret(t, err)
	_, err = wait(t, node(t, s, proxmoxsim.Sleeper), power.On, time.Minute)
	if !errors.Is(err, power.ErrCredentials) || !strings.Contains(err.Error(), "it needs Sys.PowerMgmt and Sys.Audit on /nodes/pve2") {
		t.Fatalf("no Sys.PowerMgmt: %v", err)
	}
}

func TestNothingListening(t *testing.T) {
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	d := &Driver{Endpoint: "https://" + addr, Node: "pve2", TokenID: proxmoxsim.TokenID, Secret: proxmoxsim.Secret, Timeout: time.Second}
	_, err = d.Status(context.Background())
	if !errors.Is(err, power.ErrUnreachable) || power.Reason(err) != "Unreachable" ||
		!strings.Contains(err.Error(), "no Proxmox API answered at "+addr+"; check the address and the port (8006); for a node, the address is another member of its cluster that is up") {
		t.Fatalf("nothing listening: %v; want unreachable, the address named", err)
	}
	noSecret(t, err)
	d.Endpoint = "http://" + addr
	if _, err := d.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "want https") {
		t.Fatalf("http address: %v; want refused", err)
	}
}

func TestPinnedAndUntrustedCertificate(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{})
	ctx := context.Background()
	d := guest(t, s, "", proxmoxsim.VMID)
	d.RootCAs, d.Fingerprint = nil, s.Fingerprint
	if r, err := d.Status(ctx); err != nil || r.State != power.Off {
		t.Fatalf("pinned fingerprint: %+v, %v", r, err)
	}
	seen := s.Requests()

	d.Fingerprint = make([]byte, 32)
	_, err := d.Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "is not the pinned one: its SHA-256 fingerprint is "+power.FormatFingerprint(s.Fingerprint)) {
		t.Fatalf("wrong fingerprint: %v; want the certificate refused, its fingerprint named", err)
	}
	noSecret(t, err)
	d.Fingerprint, d.RootCAs = nil, x509.NewCertPool()
	_, err = d.Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "is not trusted: give the CA that signed it (--ca-file) or pin its SHA-256 fingerprint (--fingerprint)") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	if s.Requests() != seen {
		t.Fatal("a request, with the token, reached a host whose certificate was refused")
	}
}

func TestValidate(t *testing.T) {
	ok := Driver{Endpoint: "https://pve1.lab:8006", Node: "pve1", VMID: 100, TokenID: "claimstream@pve!power", Secret: "s"}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mod  func(*Driver)
		want string
	}{
		{func(d *Driver) { d.Node = "pve1/../x" }, "want the node's name"},
		{func(d *Driver) { d.VMID = 99 }, "want 100 to 999999999"},
		{func(d *Driver) { d.Kind = "openvz" }, "want qemu or lxc"},
		{func(d *Driver) { d.TokenID = "claimstream@pve" }, "want USER@REALM!TOKENID"},
		{func(d *Driver) { d.TokenID = "power" }, "want USER@REALM!TOKENID"},
		{func(d *Driver) { d.Secret = "" }, "secret: empty"},
		{func(d *Driver) { d.Endpoint = "pve1.lab:8006" }, "want https"},
	} {
		d := ok
		tc.mod(&d)
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want %q", d, err, tc.want)
		}
	}
}
