package proxmox

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/claimstream/claimstream/internal/power"
)

func TestDecodeClusterStatus(t *testing.T) {
	// Booleans come as 0 and 1 from the API, as true and false from some
	// proxies; the cluster entry is not a node.
	ms, err := decodeClusterStatus([]byte(`{"data":[{"type":"cluster","id":"cluster","name":"lab","quorate":1},
		{"type":"node","name":"pve1","online":1,"local":1},{"type":"node","name":"pve2","online":false},{"type":"node","name":"pve3"}]}`))
	if err != nil || len(ms) != 3 || !ms[0].Online || !ms[0].Local || ms[1].Online || ms[2].Online || ms[2].Name != "pve3" {
		t.Fatalf("decodeClusterStatus: %+v, %v", ms, err)
	}
	for _, b := range []string{`{"data":null}`, `{"data":[{"type":"node","name":"x","online":"yes"}]}`, `[]`} {
		if _, err := decodeClusterStatus([]byte(b)); err == nil {
			t.Errorf("decodeClusterStatus(%s): no error", b)
		}
	}
}

func TestDecodeReplies(t *testing.T) {
	if s, err := decodeGuestStatus([]byte(`{"data":{"status":"running","qmpstatus":"paused"}}`)); err != nil || State(s) != power.On {
		t.Fatalf("decodeGuestStatus: %q, %v", s, err)
	}
	if _, err := decodeGuestStatus([]byte(`{"data":{}}`)); err == nil {
		t.Fatal("a status reply without status accepted")
	}
	if _, err := decodeUPID([]byte(`{"data":"not a task"}`)); err == nil {
		t.Fatal("a task reply without a UPID accepted")
	}
	if _, err := decodeUPID([]byte(`{"data":"UPID:pve1:../../../cluster/status"}`)); err == nil {
		t.Fatal("a UPID that would change the request's path accepted")
	}
	if st, err := decodeTaskStatus([]byte(`{"data":{"status":"stopped","exitstatus":"OK","type":"qmstart"}}`)); err != nil || st != (taskStatus{Status: "stopped", ExitStatus: "OK"}) {
		t.Fatalf("decodeTaskStatus: %+v, %v", st, err)
	}
	if _, err := decodeTaskStatus([]byte(`{"data":{"exitstatus":"OK"}}`)); err == nil {
		t.Fatal("a task status without its status accepted")
	}
	got := errorMessage([]byte(`{"data":null,"message":"Parameter verification failed.\n","errors":{"vmid":"invalid format","command":"value 'x' does not have a value in the enumeration"}}`))
	if got != "Parameter verification failed.; command: value 'x' does not have a value in the enumeration; vmid: invalid format" {
		t.Fatalf("errorMessage: %q", got)
	}
}

// FuzzDecode feeds every decoder of the API's replies the same bytes:
// none panics, and what they accept is well formed.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"data":{"status":"running","vmid":100}}`))
	f.Add([]byte(`{"data":[{"type":"cluster","name":"lab"},{"type":"node","name":"pve1","online":1,"local":1}]}`))
	f.Add([]byte(`{"data":"UPID:pve1:00000FA1:0001E241:69559201:qmstart:100:claimstream@pve!power:"}`))
	f.Add([]byte(`{"data":null,"message":"VM 100 already running\n","errors":{"vmid":"x"}}`))
	f.Add([]byte(`{"data":{"status":"stopped","exitstatus":"can't lock file","upid":"UPID:pve1:"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decodeGuestStatus(b); err == nil {
			switch State(s) {
			case power.On, power.Off, power.Unknown:
			default:
				t.Fatalf("state %q", State(s))
			}
		}
		if ms, err := decodeClusterStatus(b); err == nil {
			for _, m := range ms {
				if m.Name == "" {
					t.Fatalf("member without a name: %+v", ms)
				}
			}
		}
		if upid, err := decodeUPID(b); err == nil && (!strings.HasPrefix(upid, "UPID:") || strings.ContainsAny(upid, "/?#")) {
			t.Fatalf("upid %q", upid)
		}
		if st, err := decodeTaskStatus(b); err == nil && st.Status != "running" && st.Status != "stopped" {
			t.Fatalf("task status %+v", st)
		}
		msg := errorMessage(b)
		if len(msg) > 400 || !utf8.ValidString(msg) {
			t.Fatalf("message %q", msg)
		}
	})
}
