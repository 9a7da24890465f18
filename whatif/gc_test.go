package whatif_test

import (
	"context"
	"math"
	"runtime/debug"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/whatif"
)

// gcSetting reads the GC percent and the memory limit without changing them.
func gcSetting() (percent int, limit int64) {
	percent = debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

// While a what-if's runs go, the GC runs at a ninth of its default pace
// under a soft memory limit (the memory in use plus whatif.RunMemoryHeadroom); both are as they were
// once the what-if is done. A GOGC or GOMEMLIMIT of the operator's would be
// left alone (the test unsets them).
func TestAWhatIfRunsTheGCAtALowerPaceUnderAMemoryLimitAndRestoresIt(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	oldPercent := debug.SetGCPercent(100)
	oldLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(oldPercent); debug.SetMemoryLimit(oldLimit) })

	yaml := poolYAML(events.ScalerClusterAutoscaler, 2, 2, 0)
	r := newRecorder(t, yaml, sim.Timing{})
	from := r.h.Clock.Now()
	if _, err := r.h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"}); err != nil {
		t.Fatal(err)
	}
	r.runFor(t, 10*time.Minute)
	to := r.h.Clock.Now()

	var during [][2]int64
	_, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: to, Seed: 1,
		Candidates: []whatif.Candidate{{Name: "same.yaml", Config: parsePool(t, "same.yaml", yaml)}},
		Progress: func(whatif.Progress) {
			p, l := gcSetting()
			during = append(during, [2]int64{int64(p), l})
		}})
	if err != nil {
		t.Fatal(err)
	}
	if len(during) == 0 {
		t.Fatal("no progress reported")
	}
	for _, s := range during {
		// The limit is what the runtime held at the start plus the
		// headroom; this test process holds well under 2 GiB.
		if s[0] != whatif.RunGCPercent || s[1] <= whatif.RunMemoryHeadroom || s[1] > whatif.RunMemoryHeadroom+2<<30 {
			t.Fatalf("during the runs: GC percent %d, memory limit %d; want %d and the memory in use plus %d", s[0], s[1], whatif.RunGCPercent, whatif.RunMemoryHeadroom)
		}
	}
	if p, l := gcSetting(); p != 100 || l != math.MaxInt64 {
		t.Errorf("after the what-if: GC percent %d, memory limit %d; want 100 and none", p, l)
	}

	// A limit the process set itself (serve's) is its own.
	debug.SetMemoryLimit(1 << 40)
	during = nil
	if _, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: to, Seed: 1,
		Candidates: []whatif.Candidate{{Name: "same.yaml", Config: parsePool(t, "same.yaml", yaml)}},
		Progress: func(whatif.Progress) {
			p, l := gcSetting()
			during = append(during, [2]int64{int64(p), l})
		}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range during {
		if s[1] != 1<<40 {
			t.Fatalf("during the runs: memory limit %d, want the process's own %d", s[1], int64(1<<40))
		}
	}
	if _, l := gcSetting(); l != 1<<40 {
		t.Errorf("after the what-if: memory limit %d, want the process's own %d", l, int64(1<<40))
	}
}
