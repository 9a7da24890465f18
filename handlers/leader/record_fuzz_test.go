package leader

import (
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeLeaseRecord: any value of the lease key decodes without a
// panic to a record that names a replica, or to the zero record (nobody's
// lease); a decoded record written back decodes the same.
func FuzzDecodeLeaseRecord(f *testing.F) {
	good, _ := json.Marshal(LeaseRecord{Holder: Holder{Replica: "claimstream-1", GRPCAddress: "10.0.0.5:8086", APIAddress: "10.0.0.5:8087"}, Renewed: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), LeaseDuration: "15s"})
	f.Add(good)
	f.Add([]byte(`{"replica":""}`))
	f.Add([]byte(`{"replica":7}`))
	f.Add([]byte(`null`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec := decodeLeaseRecord(b)
		if rec.Replica == "" {
			if rec != (LeaseRecord{}) {
				t.Fatalf("a record without a replica kept fields: %+v", rec)
			}
			return
		}
		again, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		if back := decodeLeaseRecord(again); back.Holder != rec.Holder || !back.Renewed.Equal(rec.Renewed) || back.LeaseDuration != rec.LeaseDuration {
			t.Fatalf("round trip: %+v -> %+v", rec, back)
		}
	})
}
