package cost

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/internal/claimname"
)

// benchLog is a month of a pool of 10,000 slots in 10 groups, each slot
// claimed, booted, scaled down and powered off 12 times: 1,000,000 events
// in time order.
func benchLog(tb testing.TB) []events.Event {
	tb.Helper()
	return cycleLog(10_000, 12, 1_000_000)
}

// cycleLog is slots in 10 groups, each claimed, booted, scaled down and
// powered off cycles times, and filler events up to n, in time order.
func cycleLog(slots, cycles, n int) []events.Event {
	const groups = 10
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	p := func(v float64) *float64 { return &v }
	evs := make([]events.Event, 0, n)
	for g := range groups {
		evs = append(evs, events.Event{Time: start, Data: events.GroupDeclared{Ref: events.Ref{Group: fmt.Sprintf("g%d", g)},
			Spec: events.GroupSpec{Cost: &events.Cost{PricePerHour: p(0.1), PowerWatts: p(80), EnergyPricePerKWh: p(0.3), Currency: "EUR"}}}})
	}
	for s := range slots {
		slot, group := fmt.Sprintf("s%d", s), fmt.Sprintf("g%d", s%groups)
		evs = append(evs, events.Event{Time: start, Data: events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: group}}})
		// Slots start their cycles at different minutes, so the log
		// interleaves them.
		t := start.Add(time.Duration(s%1440) * time.Minute)
		for c := range cycles {
			claim := claimname.Of(slot, uint32(c)) // named as claims are
			ref := events.Ref{Slot: slot, Group: group, Claim: claim}
			at := func(d time.Duration) time.Time { return t.Add(d) }
			evs = append(evs,
				events.Event{Time: at(0), Data: events.ClaimCreated{Ref: ref, RequestedBy: []string{"ca", "alice", "bob"}[c%3]}},
				events.Event{Time: at(time.Second), Data: events.ClaimBooting{Ref: ref}},
				events.Event{Time: at(5 * time.Minute), Data: events.MachinePoweredOn{Ref: ref, At: at(4 * time.Minute), AtSource: events.AtNodeCondition}},
				events.Event{Time: at(6 * time.Minute), Data: events.ClaimReady{Ref: ref}},
				events.Event{Time: at(20 * time.Hour), Data: events.ScaleDownRequested{Ref: ref}},
				events.Event{Time: at(20*time.Hour + time.Minute), Data: events.ShutdownFired{Ref: ref}},
				events.Event{Time: at(20*time.Hour + time.Minute), Data: events.ClaimCompleted{Ref: ref}},
				events.Event{Time: at(20*time.Hour + 3*time.Minute), Data: events.MachinePoweredOff{Ref: ref, At: at(20*time.Hour + 2*time.Minute), AtSource: events.AtNodeCondition, Reason: events.PowerOffShutdown}},
			)
			t = t.Add(60 * time.Hour)
		}
	}
	for len(evs) < n {
		evs = append(evs, events.Event{Time: start.Add(29 * 24 * time.Hour), Data: events.NodeObserved{Ref: events.Ref{Slot: "s0", Group: "g0"}}})
	}
	for i := range evs {
		evs[i].Seq = uint64(i + 1)
	}
	slices.SortFunc(evs, func(a, b events.Event) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return int(a.Seq) - int(b.Seq)
	})
	return evs
}

// BenchmarkCostReport folds a month of 1,000,000 events over 10,000 slots
// into a report by group for the 30 days (docs/benchmarks.md, "Cost
// report"); reading the events from the log is not included.
func BenchmarkCostReport(b *testing.B) {
	evs := benchLog(b)
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := since.AddDate(0, 0, 30)
	cpu0 := cpuTime()
	n := 0
	for b.Loop() {
		n++
		f := NewFold(ByGroup, since, until)
		for _, e := range evs {
			f.Apply(e)
		}
		if r := f.Report(time.Time{}); len(r.Rows) != 10 {
			b.Fatalf("%d rows", len(r.Rows))
		}
	}
	b.ReportMetric(float64(len(evs)), "events")
	// The CPU time one report takes, which a loaded machine's wall clock
	// (ns/op) overstates.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCostIndex builds the index from the same month of 1,000,000
// events over 10,000 slots ("build"; heap-MB is the live heap the index
// holds after a collection), then times a 30-day report by group and by
// slot from it, and the fold's report by group in the same run
// (docs/benchmarks.md, "Cost report"). Reading the events from the log is
// not included.
func BenchmarkCostIndex(b *testing.B) {
	since := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	until := since.AddDate(0, 0, 30)
	evs := benchLog(b)
	// A history file as serve's: full chunks of spans on disk.
	history, err := chunkfile.Open(b.TempDir(), "cost")
	if err != nil {
		b.Fatal(err)
	}
	defer history.Close()
	buildWith := func(h *chunkfile.File) *Index {
		x := newIndex(h)
		for _, e := range evs {
			x.Apply(e)
		}
		return x
	}
	build := func() *Index { return buildWith(nil) }
	fold := func() Report {
		f := NewFold(ByGroup, since, until)
		for _, e := range evs {
			f.Apply(e)
		}
		return f.Report(time.Time{})
	}
	withCPU := func(b *testing.B, fn func()) {
		cpu0, n := cpuTime(), 0
		for b.Loop() {
			n++
			fn()
		}
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(n), "cpu-ns/op")
	}
	b.Run("build", func(b *testing.B) {
		var x *Index
		base := heapAlloc()
		withCPU(b, func() { x = nil; x = build() })
		b.ReportMetric(float64(heapAlloc()-base)/1e6, "heap-MB")
		b.ReportMetric(float64(x.Spans()), "spans")
		runtime.KeepAlive(x)
	})
	var onDisk *Index
	b.Run("build-on-disk", func(b *testing.B) {
		onDisk = nil // a -count before this one built it
		base := heapAlloc()
		withCPU(b, func() { onDisk = nil; onDisk = buildWith(history) })
		b.ReportMetric(float64(heapAlloc()-base)/1e6, "heap-MB")
		runtime.KeepAlive(onDisk)
	})
	x := build()
	if !reflect.DeepEqual(mustReport(b, x, ByGroup, since, until, time.Time{}), fold()) {
		b.Fatal("the index's report is not the fold's")
	}
	b.Run("index-by-group", func(b *testing.B) {
		withCPU(b, func() {
			if r := mustReport(b, x, ByGroup, since, until, time.Time{}); len(r.Rows) != 10 {
				b.Fatalf("%d rows", len(r.Rows))
			}
		})
	})
	b.Run("index-by-group-on-disk", func(b *testing.B) {
		if onDisk == nil {
			onDisk = buildWith(history)
		}
		withCPU(b, func() {
			if r := mustReport(b, onDisk, ByGroup, since, until, time.Time{}); len(r.Rows) != 10 {
				b.Fatalf("%d rows", len(r.Rows))
			}
		})
	})
	b.Run("index-by-slot", func(b *testing.B) {
		withCPU(b, func() {
			if r := mustReport(b, x, BySlot, since, until, time.Time{}); len(r.Rows) != 10_000 {
				b.Fatalf("%d rows", len(r.Rows))
			}
		})
	})
	b.Run("index-by-claim", func(b *testing.B) {
		withCPU(b, func() {
			if r := mustReport(b, x, ByClaim, since, until, time.Time{}); len(r.Rows) < 10_000 {
				b.Fatalf("%d rows", len(r.Rows))
			}
		})
	})
	b.Run("fold-by-group", func(b *testing.B) {
		withCPU(b, func() {
			if r := fold(); len(r.Rows) != 10 {
				b.Fatalf("%d rows", len(r.Rows))
			}
		})
	})
}

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
