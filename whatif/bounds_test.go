package whatif_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/whatif"
)

// TestAWhatIfIsBounded: a period past MaxWindow is refused before
// anything is read, naming the limit; runs that outlast their time limit
// are stopped and refused, naming it.
func TestAWhatIfIsBounded(t *testing.T) {
	yaml := poolYAML(events.ScalerClusterAutoscaler, 4, 4, 0)
	r := newRecorder(t, yaml, sim.Timing{})
	from := r.h.Clock.Now()
	if _, err := r.h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"}); err != nil {
		t.Fatal(err)
	}
	r.runFor(t, 20*time.Minute)
	cands := []whatif.Candidate{{Name: "same.yaml", Config: parsePool(t, "same.yaml", yaml)}}

	_, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: from.Add(whatif.MaxWindow + time.Second), Candidates: cands})
	if !errors.Is(err, whatif.ErrWindowTooLong) || !strings.Contains(err.Error(), "31 days (whatif.MaxWindow)") {
		t.Fatalf("a period past the limit: %v", err)
	}
	_, err = whatif.ParseRequest([]byte(`{"from":"2000-01-01T00:00:00Z","to":"9999-01-01T00:00:00Z","candidates":[{"name":"a.yaml","pool":"groups: []"}]}`))
	if !errors.Is(err, whatif.ErrWindowTooLong) {
		t.Fatalf("a request for 2000-9999: %v", err)
	}

	_, err = whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: r.h.Clock.Now(), Candidates: cands, RunTimeLimit: time.Nanosecond})
	if !errors.Is(err, whatif.ErrRunTooLong) || !strings.Contains(err.Error(), "limit 1ns") {
		t.Fatalf("runs past their time limit: %v", err)
	}
	// Within both, it runs.
	if _, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: r.h.Clock.Now(), Candidates: cands, MinSamples: 1}); err != nil {
		t.Fatal(err)
	}
}
