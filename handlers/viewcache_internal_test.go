package handlers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// TestSlotViewIsBuiltOncePerFoldedEvent: the reactors of a pass share one
// view of a slot while nothing is folded (reading it again copies
// nothing), and the next folded event gives a fresh view.
func TestSlotViewIsBuiltOncePerFoldedEvent(t *testing.T) {
	views, append := runningViews(t)
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	append(
		events.Write{Aggregate: events.GroupAggregate("g"), Events: []events.Event{{Time: at, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler, MaxSize: 1}}}}},
		events.Write{Aggregate: events.SlotAggregate("s"), Events: []events.Event{{Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: "s", Group: "g", Cause: "test"}}}}},
	)
	b := base{views: views, cache: &viewCache{}}
	if v := b.view("s"); !v.Exists || !v.Active || v.Live != nil {
		t.Fatalf("declared slot: exists %v, active %v, live %v", v.Exists, v.Active, v.Live)
	}
	slotSeq := func() (seq uint64) {
		views.Read(func(s *projections.State) { seq = s.Slots["s"].Seq })
		return seq
	}
	ref := events.Ref{Claim: "c1", Slot: "s", Group: "g", Attempt: 1, Cause: "test"}
	append(events.Write{Aggregate: events.SlotAggregate("s"), Expected: slotSeq(), Events: []events.Event{{Time: at, Data: events.ClaimCreated{
		Ref: ref, RequestedAt: at, RequestedBy: "test", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
		DeadlineAt: at.Add(12 * time.Minute), Budget: events.Duration(12 * time.Minute), TTL: events.Duration(time.Hour),
	}}}})
	v := b.view("s")
	if v.Live == nil || v.Live.Name != "c1" || v.Newest == nil || v.Newest.Name != "c1" {
		t.Fatalf("after ClaimCreated the view has live %v, newest %v; want c1", v.Live, v.Newest)
	}
	phase := v.Live.Phase
	// Building it copies the slot and its claims (several allocations);
	// reading it again, only the read's closure may allocate.
	verify := verifyViewCache
	verifyViewCache = nil // it builds the view again to compare
	defer func() { verifyViewCache = verify }()
	if allocs := testing.AllocsPerRun(100, func() { b.view("s") }); allocs > 1 {
		t.Errorf("reading an unchanged slot's view allocates %.0f times, want at most 1", allocs)
	}

	append(events.Write{Aggregate: events.SlotAggregate("s"), Expected: slotSeq(), Events: []events.Event{{Time: at.Add(time.Second), Data: events.ClaimBooting{Ref: ref, StartupJob: "c1-start-1"}}}})
	if v := b.view("s"); v.Live == nil || v.Live.Phase == phase {
		t.Fatalf("after ClaimBooting the view still shows phase %v", phase)
	}
}

// TestSlotViewIsKeptUntilItsSlotsEvent: a cache told of every fold keeps
// a slot's view while events of other slots are folded (a reactor's
// append on one slot does not cost every other slot's view of the pass),
// and builds it again after an event of its own slot or of no slot.
func TestSlotViewIsKeptUntilItsSlotsEvent(t *testing.T) {
	views, append := runningViews(t)
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	append(
		events.Write{Aggregate: events.GroupAggregate("g"), Events: []events.Event{{Time: at, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler, MaxSize: 2}}}}},
		events.Write{Aggregate: events.SlotAggregate("s"), Events: []events.Event{{Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: "s", Group: "g", Cause: "test"}}}}},
		events.Write{Aggregate: events.SlotAggregate("u"), Events: []events.Event{{Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: "u", Group: "g", Cause: "test"}}}}},
	)
	b := base{views: views, cache: newViewCache(views)}
	verify := verifyViewCache
	verifyViewCache = nil // it builds the view again to compare
	defer func() { verifyViewCache = verify }()
	b.view("s")
	b.view("u")
	slotSeq := func(slot string) (seq uint64) {
		views.Read(func(s *projections.State) { seq = s.Slots[slot].Seq })
		return seq
	}
	claim := func(slot, name string) {
		t.Helper()
		ref := events.Ref{Claim: name, Slot: slot, Group: "g", Attempt: 1, Cause: "test"}
		append(events.Write{Aggregate: events.SlotAggregate(slot), Expected: slotSeq(slot), Events: []events.Event{{Time: at, Data: events.ClaimCreated{
			Ref: ref, RequestedAt: at, RequestedBy: "test", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
			DeadlineAt: at.Add(12 * time.Minute), Budget: events.Duration(12 * time.Minute), TTL: events.Duration(time.Hour),
		}}}})
	}
	claim("u", "c-u")
	if allocs := testing.AllocsPerRun(100, func() { b.view("s") }); allocs > 1 {
		t.Errorf("after an event of slot u, reading slot s's view allocates %.0f times, want at most 1 (kept)", allocs)
	}
	if v := b.view("u"); v.Live == nil || v.Live.Name != "c-u" {
		t.Fatalf("after ClaimCreated on u its view has live %v, want c-u", v.Live)
	}
	claim("s", "c-s")
	if v := b.view("s"); v.Live == nil || v.Live.Name != "c-s" {
		t.Fatalf("after ClaimCreated on s its view has live %v, want c-s", v.Live)
	}
	append(events.Write{Aggregate: events.GroupAggregate("g"), Expected: 1, Events: []events.Event{{Time: at, Data: events.GroupChanged{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler, MaxSize: 5}}}}})
	if v := b.view("u"); v.Group.MaxSize != 5 {
		t.Fatalf("after the group changed, slot u's view has maxSize %d, want 5", v.Group.MaxSize)
	}
}

// runningViews are views kept current on a fresh store, and an append that
// returns once they have folded what it wrote.
func runningViews(t *testing.T) (*projections.Runner, func(ws ...events.Write)) {
	t.Helper()
	ctx := context.Background()
	st, _ := eventstest.NewStore(t)
	views := projections.NewRunner(st, projections.RunnerOptions{})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- views.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return views, func(ws ...events.Write) {
		t.Helper()
		res, err := st.AppendWrites(ctx, ws...)
		if err != nil {
			t.Fatal(err)
		}
		if err := views.WaitFor(ctx, res.Last); err != nil {
			t.Fatal(err)
		}
	}
}

// TestViewCacheHoldsABoundedNumberOfViews: reading every slot's view (a
// full resync) keeps at most viewCacheSize of them, the newest built; the
// slot read last is still shared.
func TestViewCacheHoldsABoundedNumberOfViews(t *testing.T) {
	views, write := runningViews(t)
	at := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	const slots = 3*viewCacheSize + 5
	ws := []events.Write{{Aggregate: events.GroupAggregate("g"), Events: []events.Event{{Time: at, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler, MaxSize: slots}}}}}}
	for i := range slots {
		name := fmt.Sprintf("s%03d", i)
		ws = append(ws, events.Write{Aggregate: events.SlotAggregate(name), Events: []events.Event{{Time: at, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}}}}})
	}
	write(ws...)
	cache := newViewCache(views)
	b := base{views: views, cache: cache}
	verify := verifyViewCache
	verifyViewCache = nil // it builds the view again to compare
	defer func() { verifyViewCache = verify }()
	for round := range 2 {
		for i := range slots {
			if v := b.view(fmt.Sprintf("s%03d", i)); !v.Exists {
				t.Fatalf("round %d: slot s%03d has no view", round, i)
			}
			cache.mu.Lock()
			n := len(cache.views)
			cache.mu.Unlock()
			if n > viewCacheSize {
				t.Fatalf("round %d: %d views kept after reading %d slots, want at most %d", round, n, i+1, viewCacheSize)
			}
		}
	}
	last := fmt.Sprintf("s%03d", slots-1)
	if allocs := testing.AllocsPerRun(100, func() { b.view(last) }); allocs > 1 {
		t.Errorf("reading the slot read last allocates %.0f times, want at most 1 (kept)", allocs)
	}
	cache.mu.Lock()
	_, oldest := cache.views[fmt.Sprintf("s%03d", slots-viewCacheSize-1)]
	cache.mu.Unlock()
	if oldest {
		t.Errorf("a view built %d views ago is still kept", viewCacheSize)
	}
}
