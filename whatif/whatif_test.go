package whatif_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/whatif"
)

var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// poolYAML is a pool of one group of n slots: scaler builtin (with its
// hold and maxSize) or cluster-autoscaler; one EUR an hour a machine.
func poolYAML(scaler string, n, maxSize int, hold time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "groups:\n  - name: g\n    minSize: 0\n    maxSize: %d\n    scaler: %s\n    readinessTaints: []\n", maxSize, scaler)
	if scaler == events.ScalerBuiltin {
		fmt.Fprintf(&b, "    builtin: {podsPerNode: 4, maxNodes: %d, hold: %s}\n", n, hold)
	}
	b.WriteString("    cost: {pricePerHour: 1, powerWatts: 100, currency: EUR}\nslots:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: m-%d\n    group: g\n    startup: {podSpec: {restartPolicy: Never, containers: [{name: up, image: busybox}]}}\n    shutdown: {podSpec: {restartPolicy: Never, containers: [{name: down, image: busybox}]}}\n", i)
	}
	return b.String()
}

func parsePool(t testing.TB, name, yaml string) *pool.Config {
	t.Helper()
	cfg, err := pool.Parse(name, []byte(yaml))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cfg
}

// recorder is a pool recorded by the simulator: the truth is known.
type recorder struct {
	h *handlerstest.Harness
	w *sim.World
}

func newRecorder(t testing.TB, yaml string, timing sim.Timing) *recorder {
	t.Helper()
	h := handlerstest.New(t)
	a := &pool.Applier{Service: h.Service, Views: h.Views, Clock: h.Clock, Log: quiet}
	if _, err := a.Apply(context.Background(), parsePool(t, "recorded.yaml", yaml)); err != nil {
		t.Fatal(err)
	}
	// No informer lag, as the replay has none: the recording is the
	// cluster the replay models.
	w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 7, Timing: timing, Log: quiet, WatchDelay: -1})
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := &recorder{h: h, w: w}
	t.Cleanup(r.stop)
	return r
}

// stop stops the recording's simulated world and lets it go: a what-if
// reads the recorded log alone.
func (r *recorder) stop() {
	if r.w != nil {
		r.w.Stop()
		r.w = nil
	}
}

func (r *recorder) runFor(t testing.TB, d time.Duration) {
	t.Helper()
	if err := r.w.RunFor(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}

// bursts plays the scripted bursty work: every period, a burst of pods
// that each run for runs, count times.
func (r *recorder) bursts(t testing.TB, count, pods int, period, runs time.Duration) {
	t.Helper()
	for i := range count {
		for j := range pods {
			if err := r.w.Sim.RunPod(context.Background(), sim.PodSpec{Namespace: "work", Name: fmt.Sprintf("b%d-%d", i, j), RunsFor: runs}); err != nil {
				t.Fatal(err)
			}
		}
		r.runFor(t, period)
	}
}

// logDigest is the log's last sequence and a digest of every event in it.
func logDigest(t testing.TB, st *eventlog.Store) (uint64, string) {
	t.Helper()
	ctx := context.Background()
	last, err := st.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if err := st.Read(ctx, 1, last, func(e events.Event) error {
		data, err := json.Marshal(e.Data)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%d %s %s %s %s\n", e.Seq, e.ID, e.Subject, e.Time.Format(time.RFC3339Nano), data)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return last, fmt.Sprintf("%x", h.Sum(nil))
}

// TestReplayUnderTheSameConfigReproducesTheRecording: a period of a
// cluster-autoscaler group recorded by the simulator, replayed under the
// config it was recorded with, comes to the same claims and boots, the
// same machine-hours within 2% and the same time-to-ready (the recorded
// machines boot without jitter, so their model has none).
func TestReplayUnderTheSameConfigReproducesTheRecording(t *testing.T) {
	yaml := poolYAML(events.ScalerClusterAutoscaler, 4, 4, 0)
	r := newRecorder(t, yaml, sim.Timing{})
	// Each machine boots at its own pace (within the group's timeouts):
	// the replay's must too.
	for i, extra := range []time.Duration{0, 15 * time.Second, 30 * time.Second, 45 * time.Second} {
		r.w.Sim.SetKnobs(fmt.Sprintf("m-%d", i), sim.Knobs{BootExtra: extra})
	}
	from := r.h.Clock.Now()
	ca := func(cmd decide.Command) {
		if _, err := r.h.Service.Execute(context.Background(), cmd); err != nil && decide.CodeOf(err) == 0 {
			t.Fatal(err)
		}
	}
	ca(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"})
	r.runFor(t, 20*time.Minute)
	ca(decide.IncreaseSize{Group: "g", Delta: 3, RequestedBy: "cluster-autoscaler"}) // refused: 2 + 3 > 4
	ca(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"})
	r.runFor(t, 30*time.Minute)
	ca(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "m-0"}, {Name: "m-2"}}, RequestedBy: "cluster-autoscaler"})
	r.runFor(t, 40*time.Minute)
	ca(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"})
	r.runFor(t, time.Hour)
	to := r.h.Clock.Now()

	rep, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: to, Seed: 1, MinSamples: 1,
		Candidates: []whatif.Candidate{{Name: "same.yaml", Config: parsePool(t, "same.yaml", yaml)}}})
	if err != nil {
		t.Fatal(err)
	}
	rec, base := rep.Recorded, rep.Baseline
	t.Logf("recorded %+v", rec)
	t.Logf("baseline %+v", base)
	if rep.Requests != 5 {
		t.Errorf("demand facts: %d requests, want 5 (4 accepted, 1 refused)", rep.Requests)
	}
	if rec.Claims != 5 || rec.Boots != 5 {
		t.Fatalf("the recording itself: %d claims, %d boots; want 5 and 5", rec.Claims, rec.Boots)
	}
	for _, o := range []whatif.Outcome{base, rep.Candidates[0]} {
		if o.Claims != rec.Claims || o.Boots != rec.Boots || o.FailedBoots != rec.FailedBoots {
			t.Errorf("%s: claims %d boots %d failed %d; recorded %d %d %d", o.Name, o.Claims, o.Boots, o.FailedBoots, rec.Claims, rec.Boots, rec.FailedBoots)
		}
		if diff := o.MachineHours/rec.MachineHours - 1; diff > 0.02 || diff < -0.02 {
			t.Errorf("%s: %.3f machine-hours, recorded %.3f (%.1f%%)", o.Name, o.MachineHours, rec.MachineHours, 100*diff)
		}
		if o.TimeToReadyP50 != rec.TimeToReadyP50 || o.TimeToReadyP95 != rec.TimeToReadyP95 {
			t.Errorf("%s: time to ready p50 %s p95 %s; recorded %s %s", o.Name, o.TimeToReadyP50, o.TimeToReadyP95, rec.TimeToReadyP50, rec.TimeToReadyP95)
		}
		if o.PeakMachines != rec.PeakMachines {
			t.Errorf("%s: peak %d machines, recorded %d", o.Name, o.PeakMachines, rec.PeakMachines)
		}
	}
}

// TestBurstyWorkUnderAShorterHoldAndALowerMaxSize: a built-in group of 4
// slots (4 pods a node) recorded under a 30-minute hold through 6 bursts of
// 12 pods every 40 minutes, each pod running 15 minutes: the machines sit
// idle about 23 minutes between bursts, so the 30-minute hold keeps them
// and a 10-minute hold lets them go and boots them again. A maxSize of 2
// halves the machines, so the pods wait for one another. The recorded log
// is not changed by the what-if.
func TestBurstyWorkUnderAShorterHoldAndALowerMaxSize(t *testing.T) {
	r := newRecorder(t, poolYAML(events.ScalerBuiltin, 4, 4, 30*time.Minute), sim.Timing{PodsPerNode: 4})
	from := r.h.Clock.Now()
	r.bursts(t, 6, 12, 40*time.Minute, 15*time.Minute)
	r.runFor(t, time.Hour)
	to := r.h.Clock.Now()
	lastBefore, digestBefore := logDigest(t, r.h.Store)

	shorter := parsePool(t, "hold-10m.yaml", poolYAML(events.ScalerBuiltin, 4, 4, 10*time.Minute))
	capped := parsePool(t, "max-2.yaml", poolYAML(events.ScalerBuiltin, 4, 2, 30*time.Minute))
	rep, err := whatif.Run(context.Background(), r.h.Store, whatif.Options{From: from, To: to, Seed: 1,
		Candidates: []whatif.Candidate{{Name: "hold-10m.yaml", Config: shorter}, {Name: "max-2.yaml", Config: capped}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range append([]whatif.Outcome{rep.Recorded, rep.Baseline}, rep.Candidates...) {
		t.Logf("%+v", o)
	}
	// Each slot booted once (m-3 never): too thin for its own model, so
	// all take their group's pooled history (3 boots).
	if got := strings.Join(rep.FellBack, ","); got != "m-0 (group),m-1 (group),m-2 (group),m-3 (group)" {
		t.Errorf("fell back: %s", got)
	}
	lastAfter, digestAfter := logDigest(t, r.h.Store)
	if lastAfter != lastBefore || digestAfter != digestBefore {
		t.Fatalf("the what-if changed the recorded log: last %d -> %d, digest %s -> %s", lastBefore, lastAfter, digestBefore, digestAfter)
	}
	base, hold, max2 := rep.Baseline, rep.Candidates[0], rep.Candidates[1]
	// By hand (a boot takes 80s: a 20s Job, 40s to register, 20s to Ready):
	// baseline: 3 machines from 80s until the 30m hold after the last
	// burst's pods end (246m), 3 x 244m40s = 12.2 h; only the first burst
	// waits for boots: 12 pods x 80s = 16 pod-minutes.
	// hold 10m: every burst boots 3 machines, up 15m of work + the 10m
	// hold + the 20s shutdown: 18 x 25m20s = 7.6 h; 6 x 16 = 96 pod-minutes.
	// maxSize 2: 8 pods run, 4 wait for them to end: the first burst
	// 8 x 80s + 4 x 16m20s = 76, the five others 4 x 15m = 60 each: 376.
	for _, c := range []struct {
		o           whatif.Outcome
		hours       float64
		boots, peak int
		wait        float64
	}{{base, 12.2, 3, 3, 16}, {hold, 7.6, 18, 3, 96}, {max2, 8.633, 2, 2, 376}} {
		if c.o.MachineHours != c.hours || c.o.Boots != c.boots || c.o.PeakMachines != c.peak || c.o.WaitMinutes != c.wait {
			t.Errorf("%s: %.3f machine-hours, %d boots, peak %d, %.3f pod-minutes waiting; want %.3f, %d, %d, %.3f",
				c.o.Name, c.o.MachineHours, c.o.Boots, c.o.PeakMachines, c.o.WaitMinutes, c.hours, c.boots, c.peak, c.wait)
		}
	}
	if !(hold.MachineHours < base.MachineHours && hold.Boots > base.Boots) {
		t.Errorf("a shorter hold: %.3f machine-hours and %d boots; baseline %.3f and %d: want fewer hours, more boots", hold.MachineHours, hold.Boots, base.MachineHours, base.Boots)
	}
	if !(max2.WaitMinutes > base.WaitMinutes) {
		t.Errorf("maxSize 2: %.3f pod-minutes waiting; baseline %.3f: want more", max2.WaitMinutes, base.WaitMinutes)
	}
}

// TestTheSameWhatIfTwiceGivesTheSameAnswer: one seed, one answer. A
// recording with bursts of pods on a built-in group and claims asked for
// and released on a cluster-autoscaler group at once (many slots due at
// the same instant) is replayed twice under the same candidates: the two
// reports are the same, figure by figure.
func TestTheSameWhatIfTwiceGivesTheSameAnswer(t *testing.T) {
	r := newRecorder(t, poolYAML(events.ScalerBuiltin, 6, 6, 10*time.Minute), sim.Timing{PodsPerNode: 4})
	from := r.h.Clock.Now()
	r.bursts(t, 4, 14, 30*time.Minute, 12*time.Minute)
	r.runFor(t, 30*time.Minute)
	to := r.h.Clock.Now()
	opts := whatif.Options{From: from, To: to, Seed: 5, Candidates: []whatif.Candidate{
		{Name: "hold-5m.yaml", Config: parsePool(t, "hold-5m.yaml", poolYAML(events.ScalerBuiltin, 6, 6, 5*time.Minute))},
		{Name: "max-3.yaml", Config: parsePool(t, "max-3.yaml", poolYAML(events.ScalerBuiltin, 6, 3, 10*time.Minute))},
	}}
	first, err := whatif.Run(context.Background(), r.h.Store, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := whatif.Run(context.Background(), r.h.Store, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Baseline.Boots == 0 || first.Baseline.Events == 0 {
		t.Fatalf("the baseline booted nothing: %+v", first.Baseline)
	}
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(second)
	if string(a) != string(b) {
		t.Fatalf("the same what-if twice:\n%s\n%s", a, b)
	}

	ca := newRecorder(t, poolYAML(events.ScalerClusterAutoscaler, 30, 30, 0), sim.Timing{})
	from = ca.h.Clock.Now()
	for round := range 6 {
		res, err := ca.h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 10 + round, RequestedBy: "cluster-autoscaler"})
		if err != nil {
			t.Fatal(err)
		}
		ca.runFor(t, 10*time.Minute)
		var nodes []decide.NodeRef
		ca.h.Read(func(s *projections.State) {
			for _, c := range res.Claims() {
				nodes = append(nodes, decide.NodeRef{Name: s.Claims[c].Slot})
			}
		})
		if _, err := ca.h.Service.Execute(context.Background(), decide.DeleteNodes{Group: "g", Nodes: nodes, RequestedBy: "cluster-autoscaler"}); err != nil {
			t.Fatal(err)
		}
		ca.runFor(t, 10*time.Minute)
	}
	to = ca.h.Clock.Now()
	opts = whatif.Options{From: from, To: to, Seed: 5, Candidates: []whatif.Candidate{
		{Name: "max-12.yaml", Config: parsePool(t, "max-12.yaml", poolYAML(events.ScalerClusterAutoscaler, 30, 12, 0))},
	}}
	first, err = whatif.Run(context.Background(), ca.h.Store, opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err = whatif.Run(context.Background(), ca.h.Store, opts)
	if err != nil {
		t.Fatal(err)
	}
	if first.Baseline.Boots < 60 {
		t.Fatalf("the baseline booted %d machines, want the 75 asked for", first.Baseline.Boots)
	}
	a, _ = json.Marshal(first)
	b, _ = json.Marshal(second)
	if string(a) != string(b) {
		t.Fatalf("the same what-if twice:\n%s\n%s", a, b)
	}
}
