package redfish

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/internal/freeport"
	"github.com/claimstream/claimstream/internal/power"
	"github.com/claimstream/claimstream/internal/power/redfish/redfishsim"
)

var opts = power.Options{Timeout: 10 * time.Second, Interval: 10 * time.Millisecond}

func caPool(t *testing.T, s *redfishsim.Server) *x509.CertPool {
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

func driver(t *testing.T, s *redfishsim.Server, password string) *Driver {
	t.Helper()
	return &Driver{Endpoint: s.URL, Username: redfishsim.User, Password: password, RootCAs: caPool(t, s), Timeout: 2 * time.Second}
}

func TestBasicAuthOnGracefulOffForceOff(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{})
	ctx := context.Background()
	d := driver(t, s, redfishsim.Password)

	r, err := d.Status(ctx)
	if err != nil || r.State != power.Off || r.ID != "redfish:"+strings.TrimPrefix(s.URL, "https://") {
		t.Fatalf("status before: %+v, %v; want off under the BMC's address", r, err)
	}
	out, err := power.Wait(ctx, d, power.On, opts)
	if err != nil || out.Already || out.Reading.State != power.On || s.PowerState() != "On" {
		t.Fatalf("on: %+v, %v; service holds %s", out, err, s.PowerState())
	}
	out, err = power.Wait(ctx, d, power.On, opts)
	if err != nil || !out.Already {
		t.Fatalf("on when on: %+v, %v; want success, already on", out, err)
	}
	if out, err = power.Wait(ctx, d, power.Off, opts); err != nil || out.Reading.State != power.Off {
		t.Fatalf("graceful off: %+v, %v", out, err)
	}
	if _, err := power.Wait(ctx, d, power.On, opts); err != nil {
		t.Fatal(err)
	}
	d.Force = true
	if out, err = power.Wait(ctx, d, power.Off, opts); err != nil || out.Reading.State != power.Off {
		t.Fatalf("force off: %+v, %v", out, err)
	}
	if got, want := s.Resets(), []string{"On", "GracefulShutdown", "On", "ForceOff"}; !slices.Equal(got, want) {
		t.Fatalf("resets posted %v, want %v (nothing for an already-on machine)", got, want)
	}
	if _, opened, _ := s.Counts(); opened != 0 {
		t.Fatalf("basic auth opened %d sessions", opened)
	}
}

// redfishtool, another client, sees what the driver did, and the driver
// sees what redfishtool did.
func TestRedfishtoolCrossCheck(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{})
	ctx := context.Background()
	d := driver(t, s, redfishsim.Password)
	if _, err := power.Wait(ctx, d, power.On, opts); err != nil {
		t.Fatal(err)
	}
	if got := s.Redfishtool(t, "-P", "PowerState", "get"); !strings.Contains(got, `"PowerState": "On"`) {
		t.Fatalf("redfishtool after on: %s", got)
	}
	s.Redfishtool(t, "reset", "ForceOff")
	if r, err := d.Status(ctx); err != nil || r.State != power.Off {
		t.Fatalf("status after redfishtool's ForceOff: %+v, %v", r, err)
	}
	if got := s.Resets(); !slices.Equal(got, []string{"On", "ForceOff"}) {
		t.Fatalf("resets %v", got)
	}
	if _, opened, deleted := s.Counts(); opened == 0 || deleted != opened {
		t.Fatalf("redfishtool's sessions: %d opened, %d deleted", opened, deleted)
	}
}

func TestSessionAuthPinnedFingerprint(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{})
	ctx := context.Background()
	d := &Driver{Endpoint: s.URL, System: "437XR1138R2", Username: redfishsim.User, Password: redfishsim.Password, Session: true, Fingerprint: s.Fingerprint, Timeout: 2 * time.Second}
	if _, err := power.Wait(ctx, d, power.On, opts); err != nil {
		t.Fatal(err)
	}
	if s.PowerState() != "On" {
		t.Fatalf("service holds %s after on", s.PowerState())
	}
	basic, opened, deleted := s.Counts()
	if basic != 0 || opened < 2 || deleted != opened {
		t.Fatalf("basic %d, sessions opened %d, deleted %d: want only sessions, each deleted", basic, opened, deleted)
	}

	wrong := *d
	wrong.Fingerprint = make([]byte, 32)
	_, err := wrong.Status(ctx)
	if err == nil || !strings.Contains(err.Error(), "is not the pinned one") || !strings.Contains(err.Error(), power.FormatFingerprint(s.Fingerprint)) {
		t.Fatalf("wrong fingerprint: %v; want the certificate refused, its fingerprint named", err)
	}
	if _, opened2, _ := s.Counts(); opened2 != opened {
		t.Fatal("the credentials reached a service whose certificate is not the pinned one")
	}
}

func TestUntrustedCertificate(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{})
	d := driver(t, s, redfishsim.Password)
	d.RootCAs = x509.NewCertPool()
	_, err := d.Status(context.Background())
	if err == nil || !strings.Contains(err.Error(), "is not trusted: give the CA that signed it (--ca-file) or pin its SHA-256 fingerprint (--fingerprint)") {
		t.Fatalf("untrusted certificate: %v", err)
	}
	if b, _, _ := s.Counts(); b != 0 {
		t.Fatal("credentials were sent to an untrusted service")
	}
}

func TestGracefulIgnoredNeverReachesOff(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{IgnoreGraceful: true})
	s.SetPowerState("On")
	_, err := power.Wait(context.Background(), driver(t, s, redfishsim.Password), power.Off, power.Options{Timeout: 300 * time.Millisecond, Interval: 20 * time.Millisecond})
	if !errors.Is(err, power.ErrNotReached) || !strings.Contains(err.Error(), "was still on") {
		t.Fatalf("graceful shutdown ignored: %v; want never reached the state", err)
	}
}

func TestResetTypeNotAllowed(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{Allowed: []string{"On", "ForceOff"}})
	s.SetPowerState("On")
	err := driver(t, s, redfishsim.Password).Off(context.Background())
	if !errors.Is(err, power.ErrUnsupported) || !strings.Contains(err.Error(), "does not allow ResetType GracefulShutdown (it allows On, ForceOff)") {
		t.Fatalf("graceful shutdown not allowed: %v", err)
	}
	if len(s.Resets()) != 0 {
		t.Fatalf("posted %v", s.Resets())
	}
}

func TestWrongCredentials(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{})
	for _, session := range []bool{false, true} {
		d := driver(t, s, "not-the-password")
		d.Session = session
		_, err := d.Status(context.Background())
		if !errors.Is(err, power.ErrCredentials) || power.Reason(err) != "WrongCredentials" {
			t.Fatalf("session %v, wrong password: %v; want wrong credentials", session, err)
		}
		for _, want := range []string{"refused user \"" + redfishsim.User + "\"", "HTTP 401", "There is no valid session"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if strings.Contains(err.Error(), "not-the-password") {
			t.Errorf("error %q quotes the password", err)
		}
	}
}

func TestUnreachableService(t *testing.T) {
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	d := &Driver{Endpoint: "https://" + addr, Username: "u", Password: "p", Timeout: time.Second}
	_, err = d.Status(context.Background())
	if !errors.Is(err, power.ErrUnreachable) || power.Reason(err) != "Unreachable" {
		t.Fatalf("nothing listening: %v; want unreachable", err)
	}
	if !strings.Contains(err.Error(), "no Redfish service answered at "+addr) {
		t.Errorf("error %q does not name the address", err)
	}
	d.Endpoint = "http://" + addr
	if _, err := d.Status(context.Background()); err == nil || !strings.Contains(err.Error(), "want https") {
		t.Fatalf("http endpoint: %v; want refused", err)
	}
}
