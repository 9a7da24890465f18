package timeline

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/projections"
)

// folding is an index fed as the views' runner feeds it, by a fold of
// views of its own (no log, no runner).
type folding struct {
	*Index
	st *projections.State
}

func newFolding() *folding { return newFoldingWith(nil) }

// newFoldingWith is newFolding whose index keeps its history in history.
func newFoldingWith(history *chunkfile.File) *folding {
	f := &folding{Index: &Index{history: history}, st: projections.NewState()}
	f.reset()
	if err := f.Restore(f.st, nil); err != nil {
		panic(err)
	}
	return f
}

// fold folds e into the views, then hands it to the index.
func (f *folding) fold(e events.Event) {
	_ = projections.Evolve(f.st, e)
	f.Apply(f.st, e)
	f.mu.Lock()
	f.applyPendingLocked()
	f.mu.Unlock()
}

// foldLifecycles folds, into a fresh index, a pool of slots and n whole
// claim lifecycles on them in turn (created to collected, seconds apart),
// as serve's benchmark log holds them. It returns the index.
func foldLifecycles(slots, n int) *folding { return foldLifecyclesInto(newFolding(), slots, n) }

// foldLifecyclesInto is foldLifecycles into x.
func foldLifecyclesInto(x *folding, slots, n int) *folding {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var seq uint64
	fold := func(d events.Data) {
		seq++
		at = at.Add(time.Second)
		x.fold(events.Event{Seq: seq, Time: at, Type: d.EventType(), Aggregate: events.AggregateOf(d), Data: d})
	}
	fold(events.GroupDeclared{Ref: events.Ref{Group: "g"}})
	for s := range slots {
		slot := fmt.Sprintf("node-%d.lan", s)
		fold(events.SlotDeclared{Ref: events.Ref{Slot: slot, Group: "g"}, Spec: events.SlotSpec{ProviderID: "homelab://" + slot}})
	}
	for i := range n {
		slot := fmt.Sprintf("node-%d.lan", i%slots)
		r := events.Ref{Claim: fmt.Sprintf("%s-%06x", slot, i), Slot: slot, Group: "g", Attempt: 1}
		for _, d := range scaledDownLifecycle(r, slot, at) {
			fold(d)
		}
	}
	x.prune()
	return x
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// The index keeps a second copy of each slot's history for the dashboard,
// for as long as serve runs: at 10,000 slots and a month of claims, the
// largest thing serve holds. Each interval is held compactly (as varints
// from the previous one's end, its phase as a small code, its claim's name
// once per claim, in 4 bytes when named as claims are; the events' times
// in 4 bytes), so 20,000 claim lifecycles on 1,000 slots (100,000
// intervals) hold under 3.5 MiB with the claims' names, the events' times
// and the views folded beside it.
func TestTimelineIndexHoldsIntervalsCompactly(t *testing.T) {
	before := heapInUse()
	x := foldLifecycles(1000, 20_000)
	held := heapInUse() - before
	bars := 0
	for _, l := range x.slots {
		bars += l.bars.n
	}
	runtime.KeepAlive(x)
	t.Logf("%d intervals of %d slots: %.2f MiB held, %.0f bytes an interval", bars, len(x.slots), float64(held)/(1<<20), float64(held)/float64(bars))
	if bars < 80_000 {
		t.Fatalf("%d intervals folded, want about 100,000 (5 phases of 20,000 claims)", bars)
	}
	if held > 7<<19 {
		t.Errorf("the index holds %.2f MiB for %d intervals, want under 3.5 MiB", float64(held)/(1<<20), bars)
	}
}

// Pruning drops the names of the claims whose intervals it dropped, and
// the intervals kept still name their own claims.
func TestTimelineIndexPruneDropsTheClaimsOfDroppedIntervals(t *testing.T) {
	x := foldLifecycles(2, 10)
	l := x.slots["node-0.lan"]
	if l.claims.Len() != 5 || l.bars.n == 0 {
		t.Fatalf("node-0.lan holds %d claims and %d intervals, want 5 claims", l.claims.Len(), l.bars.n)
	}
	// Forty days later, one more claim on node-0.lan: the others are older
	// than any window.
	later := time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC)
	r := events.Ref{Claim: "node-0.lan-late", Slot: "node-0.lan", Group: "g", Attempt: 1}
	for i, d := range []events.Data{
		events.ClaimCreated{Ref: r, RequestedAt: later, RequestedBy: "carol", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
			DeadlineAt: later.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)},
		events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"},
	} {
		x.fold(events.Event{Seq: x.st.Seq + 1, Time: later.Add(time.Duration(i) * time.Minute), Type: d.EventType(), Aggregate: events.AggregateOf(d), Data: d})
	}
	x.prune()
	// Kept: the slot's rest up to the late claim (no claim), its pending
	// interval, and its booting one open.
	bars := l.bars.list()
	n := len(bars)
	if n != 2 || l.claims.Len() != 1 || l.claimOf(bars[0]) != "" || l.claimOf(bars[n-1]) != r.Claim || l.claimOf(l.open) != r.Claim {
		t.Fatalf("after the prune node-0.lan holds intervals %+v, open %+v, %d claims; want its rest, then the late claim pending, then booting", bars, l.open, l.claims.Len())
	}
	if got := x.phases[bars[n-1].phase]; got != string(projections.SlotPending) {
		t.Errorf("kept interval's phase %q, want pending", got)
	}
	if got := x.phases[l.open.phase]; got != string(projections.SlotBooting) {
		t.Errorf("open interval's phase %q, want booting", got)
	}
}
