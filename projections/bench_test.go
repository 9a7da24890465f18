package projections_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/projections"
)

// The benchmarks of docs/benchmarks.md. The log they replay is generated
// once per size and kept under the temp dir between runs
// (CLAIMSTREAM_BENCH_EVENTS sets the size, default 1,000,000):
//
//	go test ./projections -run '^$' -bench . -benchtime 3x -count 5

const benchLogVersion = "v1"

func benchEvents() int {
	if v, err := strconv.Atoi(os.Getenv("CLAIMSTREAM_BENCH_EVENTS")); err == nil && v > 0 {
		return v
	}
	return 1_000_000
}

// benchLog returns a store holding n events of a pool of 10,000 slots in
// 100 groups living through claim after claim, and a function that
// restarts its server.
func benchLog(b *testing.B, n int) (*natsserver.Embedded, *eventlog.Store, string) {
	b.Helper()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("claimstream-bench-%s-%d", benchLogVersion, n))
	fresh := false
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		os.RemoveAll(dir)
		fresh = true
	}
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	st := openStore(b, srv)
	if fresh {
		b.Logf("generating %d events in %s", n, dir)
		generate(b, st, n)
		if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return srv, st, dir
}

func openStore(b *testing.B, srv *natsserver.Embedded) *eventlog.Store {
	js, err := jetstream.New(srv.Conn, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{})
	if err != nil {
		b.Fatal(err)
	}
	return st
}

// generate publishes n events without expectations (the benchmark replays
// them; it does not test the decisions), a bounded number in flight.
func generate(b *testing.B, st *eventlog.Store, n int) {
	ctx := context.Background()
	gen := eventstest.NewBoundedPublisher(st.JetStream(), 0)
	subj := st.Subjects()
	const slots, groups = 10_000, 100
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	count := 0
	pub := func(d events.Data) {
		if count >= n {
			return
		}
		at = at.Add(time.Second)
		m, err := eventlog.ToMsg(events.Event{ID: strconv.Itoa(count), Time: at, Data: d}, subj.Subject(events.AggregateOf(d), d.EventType()))
		if err != nil {
			b.Fatal(err)
		}
		if err := gen.Publish(ctx, m); err != nil {
			b.Fatal(err)
		}
		count++
	}
	for g := 0; g < groups; g++ {
		pub(events.GroupDeclared{Ref: events.Ref{Group: fmt.Sprintf("g%d", g), Cause: "bench"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}})
	}
	for s := 0; s < slots; s++ {
		pub(events.SlotDeclared{Ref: events.Ref{Slot: fmt.Sprintf("node-%d.lan", s), Group: fmt.Sprintf("g%d", s%groups), Cause: "bench"}, Spec: events.SlotSpec{ProviderID: fmt.Sprintf("homelab://node-%d.lan", s)}})
	}
	for i := 0; count < n; i++ {
		s := i % slots
		r := events.Ref{Claim: fmt.Sprintf("node-%d.lan-%06x", s, i), Slot: fmt.Sprintf("node-%d.lan", s), Group: fmt.Sprintf("g%d", s%groups), Attempt: 1, Cause: "IncreaseSize(+1) by cluster-autoscaler"}
		req := events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: r.Group}
		pub(events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "cluster-autoscaler", Request: req, DeadlineAt: at.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)})
		pub(events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"})
		pub(events.ClaimReady{Ref: r, Node: r.Slot})
		pub(events.ScaleDownRequested{Ref: r, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Group: r.Group, Nodes: []string{r.Slot}}})
		pub(events.ShutdownFired{Ref: r, Job: r.Claim + "-stop-1", ShutdownAttempt: 1})
		pub(events.ClaimCompleted{Ref: r, Reason: projections.ReasonScaledDown})
		pub(events.ClaimCollected{Ref: r})
	}
	if err := gen.Flush(ctx); err != nil {
		b.Fatal(err)
	}
}

func reportRate(b *testing.B, n int) {
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRebuild replays the whole log: the baseline is the naive replay
// (an ordered consumer and a JSON decode per event, ~104k/s measured on this
// kind of machine), against projections.Rebuild (decode, validate the
// envelope, fold every event into the views).
func BenchmarkRebuild(b *testing.B) {
	n := benchEvents()
	srv, st, _ := benchLog(b, n)
	defer srv.Shutdown()
	ctx := context.Background()
	b.Run("baseline=naive-ordered-consumer-json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			cons, err := st.JetStream().OrderedConsumer(ctx, st.Stream(), jetstream.OrderedConsumerConfig{})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			got := 0
			var ev struct {
				Claim, Slot, Group, Cause string
				Attempt                   int
			}
			cc, err := cons.Consume(func(m jetstream.Msg) {
				if err := json.Unmarshal(m.Data(), &ev); err != nil {
					b.Error(err)
				}
				got++
				if got == n {
					close(done)
				}
			}, jetstream.PullMaxMessages(4096))
			if err != nil {
				b.Fatal(err)
			}
			<-done
			cc.Stop()
		}
		reportRate(b, n)
	})
	b.Run("projections.Rebuild", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, err := projections.Rebuild(ctx, st, 0)
			if err != nil {
				b.Fatal(err)
			}
			if s.Seq != uint64(n) || s.Stats.Applied != uint64(n) {
				b.Fatalf("rebuilt to seq %d with %+v", s.Seq, s.Stats)
			}
		}
		reportRate(b, n)
	})
}

// BenchmarkRestart measures a process restart over the log: server start,
// store open and views built; from a snapshot at the log's end, and the
// baseline without a snapshot (a full rebuild).
func BenchmarkRestart(b *testing.B) {
	n := benchEvents()
	srv, st, dir := benchLog(b, n)
	ctx := context.Background()
	snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), "bench-snapshots")
	if err != nil {
		b.Fatal(err)
	}
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := r.SnapshotNow(ctx); err != nil {
		b.Fatal(err)
	}
	srv.Shutdown()
	restart := func(b *testing.B, withSnapshot bool) {
		for i := 0; i < b.N; i++ {
			srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
			if err != nil {
				b.Fatal(err)
			}
			st := openStore(b, srv)
			opts := projections.RunnerOptions{Logger: quietLog()}
			if withSnapshot {
				opts.Snapshots, err = projections.OpenSnapshots(ctx, st.JetStream(), "bench-snapshots")
				if err != nil {
					b.Fatal(err)
				}
			}
			r := projections.NewRunner(st, opts)
			if err := r.Start(ctx); err != nil {
				b.Fatal(err)
			}
			if r.Seq() != uint64(n) {
				b.Fatalf("restarted at seq %d", r.Seq())
			}
			b.StopTimer()
			srv.Shutdown()
			b.StartTimer()
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/restart")
	}
	b.Run("baseline=no-snapshot", func(b *testing.B) { restart(b, false) })
	b.Run("snapshot", func(b *testing.B) { restart(b, true) })
}

// BenchmarkMemory10kSlots measures what 10,000 slots cost:
//
//   - views: the Go heap held by the views alone, folded in memory (no
//     server in the process), each slot declared with a spec, half of them
//     with a ready claim and its timeline, the rest with the digest of a
//     finished one; the baseline is the heap before the fold.
//   - process: the RSS of a serve-like process (embedded server + views)
//     right after a restart from a snapshot of the 1M-event bench log;
//     the baseline is the same process before the server starts.
func BenchmarkMemory10kSlots(b *testing.B) {
	b.Run("views", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			runtime.GC()
			_, before := memNow()
			s := fold10k(b)
			runtime.GC()
			_, after := memNow()
			b.ReportMetric(float64(after-before)/(1<<20), "MiB-heap-views")
			b.ReportMetric(float64(after-before)/10_000, "B/slot")
			runtime.KeepAlive(s)
		}
	})
	b.Run("process", func(b *testing.B) {
		n := benchEvents()
		srv, st, dir := benchLog(b, n)
		ctx := context.Background()
		snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), "bench-snapshots")
		if err != nil {
			b.Fatal(err)
		}
		r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
		if err := r.Start(ctx); err != nil {
			b.Fatal(err)
		}
		if err := r.SnapshotNow(ctx); err != nil {
			b.Fatal(err)
		}
		srv.Shutdown()
		for i := 0; i < b.N; i++ {
			b.ReportMetric(childRSS(b, dir, "restart"), "MiB-rss")
			b.ReportMetric(childRSS(b, dir, "baseline"), "MiB-rss-baseline")
		}
	})
}

// childRSS runs this test binary again as a fresh process that restarts
// the plane on dir from its snapshot (or, as the baseline, starts and does
// nothing) and reports its RSS: a measurement in the benchmark's own
// process would count everything it allocated before.
func childRSS(b *testing.B, dir, mode string) float64 {
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildRSS$")
	cmd.Env = append(os.Environ(), "CLAIMSTREAM_BENCH_CHILD="+mode, "CLAIMSTREAM_BENCH_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("child: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "rss-mib "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
	}
	b.Fatalf("child printed no rss:\n%s", out)
	return 0
}

// TestChildRSS is the child of childRSS; it does nothing in a normal run.
func TestChildRSS(t *testing.T) {
	mode := os.Getenv("CLAIMSTREAM_BENCH_CHILD")
	if mode == "" {
		return
	}
	if mode == "restart" {
		ctx := context.Background()
		srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: os.Getenv("CLAIMSTREAM_BENCH_DIR"), NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Shutdown()
		js, err := jetstream.New(srv.Conn)
		if err != nil {
			t.Fatal(err)
		}
		st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		snaps, err := projections.OpenSnapshots(ctx, js, "bench-snapshots")
		if err != nil {
			t.Fatal(err)
		}
		r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		var slots int
		r.Read(func(s *projections.State) { slots = len(s.Slots) })
		if slots != 10_000 {
			t.Fatalf("%d slots", slots)
		}
	}
	runtime.GC()
	rss, _ := memNow()
	fmt.Printf("rss-mib %.1f\n", float64(rss)/(1<<20))
}

// fold10k folds a 10,000-slot pool in memory.
func fold10k(b *testing.B) *projections.State {
	s := projections.NewState()
	var seq uint64
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	apply := func(d events.Data) {
		seq++
		if err := projections.Evolve(s, events.Event{Seq: seq, Time: at, Data: d, Type: d.EventType(), Aggregate: events.AggregateOf(d)}); err != nil {
			b.Fatal(err)
		}
	}
	for g := 0; g < 100; g++ {
		apply(events.GroupDeclared{Ref: events.Ref{Group: fmt.Sprintf("g%d", g), Cause: "bench"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler, ReadinessTaints: []events.Taint{projections.DefaultReadinessTaint}}})
	}
	for i := 0; i < 10_000; i++ {
		slot, group := fmt.Sprintf("node-%d.lan", i), fmt.Sprintf("g%d", i%100)
		apply(events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: group, Cause: "pool config pool.yaml"}, Spec: events.SlotSpec{
			ProviderID: "homelab://" + slot, Address: fmt.Sprintf("192.0.2.%d", i%250),
			Startup:  &events.JobSpec{PodSpec: []byte(`{"containers":[{"name":"wake","image":"busybox","command":["wake","` + slot + `"]}],"restartPolicy":"Never"}`)},
			Shutdown: &events.JobSpec{PodSpec: []byte(`{"containers":[{"name":"off","image":"busybox","command":["poweroff","` + slot + `"]}],"restartPolicy":"Never"}`)},
			Capacity: map[string]string{"cpu": "8", "memory": "32Gi"},
		}})
		r := events.Ref{Claim: fmt.Sprintf("%s-%06x", slot, i), Slot: slot, Group: group, Attempt: 1, Cause: "IncreaseSize(+1) by cluster-autoscaler for group " + group}
		apply(events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: group}, DeadlineAt: at.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)})
		apply(events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"})
		apply(events.ClaimReady{Ref: r, Node: slot})
		if i%2 == 1 {
			apply(events.ScaleDownRequested{Ref: r, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Group: group, Nodes: []string{slot}}})
			apply(events.ShutdownFired{Ref: r, Job: r.Claim + "-stop-1", ShutdownAttempt: 1})
			apply(events.ClaimCompleted{Ref: r, Reason: projections.ReasonScaledDown})
			apply(events.ClaimCollected{Ref: r})
		}
	}
	return s
}

func memNow() (rss, heap uint64) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, err := os.ReadFile("/proc/self/status")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseUint(f[1], 10, 64)
				rss = kb << 10
			}
		}
	}
	return rss, ms.HeapInuse
}
