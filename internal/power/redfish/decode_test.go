package redfish

import (
	"testing"
	"unicode/utf8"

	"github.com/claimstream/claimstream/internal/power"
)

func TestDecodeSystemRefusesForeignTarget(t *testing.T) {
	for _, target := range []string{"https://elsewhere/reset", "//elsewhere/reset", "reset"} {
		_, err := decodeSystem([]byte(`{"PowerState":"On","Actions":{"#ComputerSystem.Reset":{"target":"` + target + `"}}}`))
		if err == nil {
			t.Errorf("target %q accepted", target)
		}
	}
	sys, err := decodeSystem([]byte(`{"PowerState":"PoweringOff","Actions":{"#ComputerSystem.Reset":{"target":"/redfish/v1/Systems/1/Actions/ComputerSystem.Reset","ResetType@Redfish.AllowableValues":["On"]}}}`))
	if err != nil || sys.Reset.Target != "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset" || len(sys.Reset.Allowed) != 1 || State(sys.PowerState) != power.Unknown {
		t.Fatalf("decodeSystem: %+v, %v", sys, err)
	}
}

// FuzzDecode feeds every decoder of the service's replies the same bytes:
// none panics, and what they accept holds only paths on the service.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"Systems":{"@odata.id":"/redfish/v1/Systems"},"Links":{"Sessions":{"@odata.id":"/redfish/v1/SessionService/Sessions"}}}`))
	f.Add([]byte(`{"Members":[{"@odata.id":"/redfish/v1/Systems/1"}]}`))
	f.Add([]byte(`{"PowerState":"On","Actions":{"#ComputerSystem.Reset":{"target":"/r","ResetType@Redfish.AllowableValues":["On","ForceOff"]}}}`))
	f.Add([]byte(`{"error":{"code":"Base.1.16.GeneralError","message":"x","@Message.ExtendedInfo":[{"Message":"y"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRoot(b); err == nil {
			for _, p := range []string{r.Systems, r.Sessions} {
				if p != "" && !localPath(p) {
					t.Fatalf("root path %q", p)
				}
			}
		}
		if ms, err := decodeCollection(b); err == nil {
			for _, m := range ms {
				if !localPath(m) {
					t.Fatalf("member %q", m)
				}
			}
		}
		if sys, err := decodeSystem(b); err == nil {
			if sys.Reset.Target != "" && !localPath(sys.Reset.Target) {
				t.Fatalf("target %q", sys.Reset.Target)
			}
			switch State(sys.PowerState) {
			case power.On, power.Off, power.Unknown:
			default:
				t.Fatalf("state %q", State(sys.PowerState))
			}
		}
		msg := errorMessage(b)
		if len(msg) > 400 || !utf8.ValidString(msg) {
			t.Fatalf("message %q", msg)
		}
	})
}
