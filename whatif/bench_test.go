package whatif_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/whatif"
)

// BenchmarkWhatIfWeek: a week of a 100-slot cluster-autoscaler pool
// recorded by the simulator (cluster-autoscaler's target follows a daily
// wave between 5 and 95 machines, changed every 5 minutes), replayed under
// the baseline and 3 candidate configs (maxSize 50, 80 and 100). Reports
// the recorded events and the wall time of the what-if (all four runs).
// WHATIF_BENCH_HOURS and WHATIF_BENCH_SLOTS shrink it; WHATIF_BENCH_RUNS
// times the what-if that many times (medians). WHATIF_BENCH_FLAP=N
// makes a busier log: the target also flaps by N machines every 5
// minutes (N claims asked for, then released at the next step).
//
//	go test ./whatif/ -run '^$' -bench BenchmarkWhatIfWeek -benchtime 1x -timeout 60m
func BenchmarkWhatIfWeek(b *testing.B) {
	hours, slots := envInt("WHATIF_BENCH_HOURS", 7*24), envInt("WHATIF_BENCH_SLOTS", 100)
	flap := 0
	if v, err := strconv.Atoi(os.Getenv("WHATIF_BENCH_FLAP")); err == nil && v > 0 {
		flap = v
	}
	r := newRecorder(b, poolYAML(events.ScalerClusterAutoscaler, slots, slots, 0), sim.Timing{})
	from := r.h.Clock.Now()
	began := time.Now()
	live := 0
	for step := 0; step < hours*12; step++ {
		day := float64(step%288) / 288
		want := int(float64(slots)*(0.5-0.45*math.Cos(2*math.Pi*day))) + step%3 + step%2*flap
		want = min(max(want, 0), slots)
		if flap > 0 {
			// A busy log asks for and releases claims all day: count and
			// release the claims the pool holds (by slot), not the
			// names m-0.. the quiet week assumes, which drift from where
			// the claims are once released machines are still shutting
			// down, until every request is refused.
			live = len(heldSlots(r, slots))
		}
		switch {
		case want > live:
			if _, err := r.h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: want - live, RequestedBy: "cluster-autoscaler"}); err == nil {
				live = want
			}
		case want < live:
			var nodes []decide.NodeRef
			for i := want; i < live; i++ {
				nodes = append(nodes, decide.NodeRef{Name: fmt.Sprintf("m-%d", i)})
			}
			if flap > 0 {
				nodes = heldSlots(r, live-want)
			}
			if _, err := r.h.Service.Execute(context.Background(), decide.DeleteNodes{Group: "g", Nodes: nodes, RequestedBy: "cluster-autoscaler"}); err == nil {
				live = want
			}
		}
		r.runFor(b, 5*time.Minute)
	}
	to := r.h.Clock.Now()
	last, _ := r.h.Store.LastSeq(context.Background())
	b.Logf("recorded %d hours of %d slots: %d events in %s", hours, slots, last, time.Since(began).Round(time.Second))
	// A what-if reads the recorded log alone: the recording's simulated
	// world (its fake cluster holds every Job of the period) goes before
	// the timed runs, as production holds none.
	r.stop()
	var cands []whatif.Candidate
	for _, max := range []int{slots / 2, slots * 4 / 5, slots} {
		name := fmt.Sprintf("max-%d.yaml", max)
		cands = append(cands, whatif.Candidate{Name: name, Config: parsePool(b, name, poolYAML(events.ScalerClusterAutoscaler, slots, max, 0))})
	}
	// WHATIF_BENCH_RUNS what-ifs of the one recording (it takes longer to
	// make than to replay): the metrics are their medians.
	runs := envInt("WHATIF_BENCH_RUNS", 1)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var walls, cpus []float64
		for run := range runs {
			stopProfile := profileWhatIf(b)
			start, cpu0 := time.Now(), cpuTime()
			rep, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: to, Seed: 1, Candidates: cands})
			if err != nil {
				b.Fatal(err)
			}
			took, cpu := time.Since(start), cpuTime()-cpu0
			stopProfile()
			walls, cpus = append(walls, took.Seconds()), append(cpus, cpu.Seconds())
			b.Logf("what-if %d of %d events, 4 runs: %s wall, %.1f s CPU, load %s; baseline %+v", run+1, last, took.Round(time.Millisecond), cpu.Seconds(), loadAverage(), rep.Baseline)
		}
		b.ReportMetric(median(walls), "wall-s/whatif")
		b.ReportMetric(median(cpus), "cpu-s/whatif")
		b.ReportMetric(float64(last), "recorded-events")
	}
}

// heldSlots are the slots of up to n of group g's claims that want a
// machine and are not being scaled down, newest first.
func heldSlots(r *recorder, n int) []decide.NodeRef {
	var held []*projections.Claim
	r.h.Views.Read(func(s *projections.State) {
		for _, cl := range s.LiveClaims("g") {
			if cl.WantsMachine() && cl.ScaleDown == nil {
				held = append(held, cl)
			}
		}
	})
	slices.SortFunc(held, func(a, b *projections.Claim) int {
		return cmp.Or(b.RequestedAt.Compare(a.RequestedAt), strings.Compare(a.Slot, b.Slot))
	})
	var out []decide.NodeRef
	for _, cl := range held[:min(n, len(held))] {
		out = append(out, decide.NodeRef{Name: cl.Slot})
	}
	return out
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadAverage is the machine's 1-minute load average ("?" where
// /proc/loadavg cannot be read): the 2 cores are shared.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

// profileWhatIf writes a CPU profile of the timed what-if alone (not of
// the recording before it) to the file WHATIF_BENCH_CPUPROFILE names.
func profileWhatIf(b *testing.B) (stop func()) {
	path := os.Getenv("WHATIF_BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
}

// cpuTime is the process's user and system CPU time: the wall clock of a
// shared machine overstates what a run costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
