package handlers

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// The reactors run from a work queue, the way Kubernetes controllers do: an
// event, an informer change or a timer enqueues only the slot it concerns;
// a few workers take the keys (the queue hands a key to one worker at a
// time, so one slot has one writer), a slot's timers are delayed adds and a
// failing slot backs off alone.

// DefaultWorkers is how many slots the reactors work on at once.
const DefaultWorkers = 4

// Backoff of a failing work item: doubles from RetryBase to RetryMax.
const (
	RetryBase = 100 * time.Millisecond
	RetryMax  = 30 * time.Second
)

// Object kinds in an ObjectChange.
const (
	KindNode = "Node"
	KindJob  = "Job"
)

// ObjectChange is one change a cluster's caches saw: a Node (by name and
// providerID) or a lifecycle Job (by name and the slot it was made for).
type ObjectChange struct {
	Kind       string
	Name       string
	ProviderID string
	Slot       string
	// GroupLabel is a Node's LabelGroup value ("" when it carries none):
	// the group whose stray-host refusal and scaler a Node under no slot
	// concerns.
	GroupLabel string
}

// ObjectWatcher is a Cluster that says which object changed (handlers/kube
// does); over one that does not, every change enqueues every slot.
type ObjectWatcher interface {
	WatchObjects(fn func(ObjectChange))
}

// QueueMetrics observe the work queue (handlers/telemetry implements it).
type QueueMetrics interface {
	// WorkDone: one work item ran (kind "slot", "scaler" or "strays").
	WorkDone(kind string, took time.Duration, failed bool)
	// Reacted: the time from an event to the end of the reconcile it
	// caused.
	Reacted(took time.Duration)
	// ObserveDepth gives the metrics the queue's length to read.
	ObserveDepth(depth func() int)
}

// workKind says what a work item reconciles.
type workKind uint8

const (
	workSlot   workKind = iota // every reactor on one slot, in pass order
	workScaler                 // the built-in scaler over one group
	workStrays                 // the refusal of one group's hosts under no slot's name
)

func (k workKind) String() string {
	switch k {
	case workScaler:
		return "scaler"
	case workStrays:
		return "strays"
	}
	return "slot"
}

// workKey is a slot (name is the slot's) or a group-level item (name is
// the group's), so a slow or failing group backs off alone and an event
// enqueues only its own group's work.
type workKey struct {
	kind workKind
	name string
}

func slotKey(slot string) workKey    { return workKey{kind: workSlot, name: slot} }
func scalerKey(group string) workKey { return workKey{kind: workScaler, name: group} }
func straysKey(group string) workKey { return workKey{kind: workStrays, name: group} }

// String names the item in logs: the slot, or "scaler/<group>",
// "strays/<group>".
func (k workKey) String() string {
	if k.kind == workSlot {
		return k.name
	}
	return k.kind.String() + "/" + k.name
}

// enqueuer takes work keys: the running queue of Reactors.Run, or a
// Stepper's set of due items.
type enqueuer interface {
	add(k workKey, at time.Time)
}

// workQueue is the running queue of Reactors.Run.
type workQueue struct {
	q workqueue.TypedRateLimitingInterface[workKey]

	mu sync.Mutex
	// since is, per key, the time of the oldest event not yet reacted to.
	since map[workKey]time.Time
}

// tickerClock is the reactors' clock with the tickers the work queue needs
// (its delayed adds run on it, so a fake clock drives them in tests).
func tickerClock(c clock.Clock) clock.WithTicker {
	if wt, ok := c.(clock.WithTicker); ok {
		return wt
	}
	return clock.RealClock{}
}

func (r *Reactors) newWorkQueue() *workQueue {
	limiter := workqueue.NewTypedItemExponentialFailureRateLimiter[workKey](RetryBase, RetryMax)
	q := workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[workKey]{
		Name:  "reactors",
		Clock: tickerClock(r.clock),
	})
	return &workQueue{q: q, since: map[workKey]time.Time{}}
}

// add enqueues a key; at, when set, is the time of the event that asks.
func (w *workQueue) add(k workKey, at time.Time) {
	if !at.IsZero() {
		w.mu.Lock()
		if _, ok := w.since[k]; !ok {
			w.since[k] = at
		}
		w.mu.Unlock()
	}
	w.q.Add(k)
}

func (w *workQueue) takeSince(k workKey) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.since[k]
	delete(w.since, k)
	return t, ok
}

// enqueueAll enqueues every slot of a group (every slot when group is "")
// and the group's (every group's) group-level work.
func (r *Reactors) enqueueAll(w enqueuer, group string, at time.Time) {
	var slots, groups []string
	r.views.Read(func(s *projections.State) {
		for name, sl := range s.Slots {
			if sl.Group != "" && (group == "" || sl.Group == group) {
				slots = append(slots, name)
			}
		}
		for name := range s.Groups {
			if group == "" || name == group {
				groups = append(groups, name)
			}
		}
	})
	for _, s := range slots {
		w.add(slotKey(s), at)
	}
	for _, g := range groups {
		w.add(scalerKey(g), at)
		w.add(straysKey(g), at)
	}
}

// groupRecords are the group events that change nothing a slot's or a
// stray host's reactor reads: the size events fold nothing (the claims of
// their batch are folded from their own events, which name their slots),
// and the demand facts only what the commands and the built-in scaler
// read. They wake the group's scaler, not every slot of the group: a busy
// group's calls would otherwise run every reactor on every slot of it.
var groupRecords = map[events.Type]bool{
	events.TypeSizeIncreased:  true,
	events.TypeSizeDecreased:  true,
	events.TypeScaleRequested: true,
	events.TypeDemandObserved: true,
}

// onEvent enqueues what a folded event concerns: its slot and its group's
// scaler; for a group's record (groupRecords) the scaler only; or every
// slot of its group when it names none (a group's spec) and the
// group-level work.
func (r *Reactors) onEvent(w enqueuer, e events.Event) {
	ref := e.Data.Reference()
	switch {
	case ref.Slot != "":
		w.add(slotKey(ref.Slot), e.Time)
		if ref.Group != "" {
			w.add(scalerKey(ref.Group), e.Time)
		}
	case groupRecords[e.Data.EventType()]:
		if ref.Group != "" {
			w.add(scalerKey(ref.Group), e.Time)
		}
	default:
		r.enqueueAll(w, ref.Group, e.Time)
	}
}

// onObject enqueues the slot a Node or Job belongs to; a Node under no
// slot is for its group's stray-host refusal. Nodes change capacity: the
// group's scaler looks too.
func (r *Reactors) onObject(w enqueuer, ch ObjectChange) {
	switch ch.Kind {
	case KindJob:
		if ch.Slot != "" {
			w.add(slotKey(ch.Slot), time.Time{})
		}
	case KindNode:
		slot, group := "", ""
		r.views.Read(func(s *projections.State) {
			if sl, ok := s.SlotForNode(ch.Name, ch.ProviderID); ok && sl != nil {
				slot, group = sl.Name, sl.Group
			} else if g, managed := groupOfLabel(s, ch.GroupLabel); ch.GroupLabel != "" && managed {
				group = g
			}
		})
		if slot != "" {
			w.add(slotKey(slot), time.Time{})
		} else if group != "" {
			w.add(straysKey(group), time.Time{})
		}
		if group != "" {
			w.add(scalerKey(group), time.Time{})
		}
	}
}

// reconcileKey runs the work of one key.
func (r *Reactors) reconcileKey(ctx context.Context, k workKey) (time.Duration, error) {
	switch k.kind {
	case workScaler:
		return r.builtinScalerGroup(ctx, k.name)
	case workStrays:
		return 0, r.strayHostsOf(ctx, k.name)
	}
	declared := false
	r.views.Read(func(s *projections.State) {
		sl := s.Slots[k.name]
		declared = sl != nil && sl.Group != ""
	})
	if !declared {
		return 0, nil // a stray-host record, or a slot not (yet) declared
	}
	return r.ReconcileSlot(ctx, k.name)
}

// work takes keys until the queue shuts down.
func (r *Reactors) work(ctx context.Context, w *workQueue) {
	for {
		k, quit := w.q.Get()
		if quit {
			return
		}
		r.workOne(ctx, w, k)
		w.q.Done(k)
	}
}

func (r *Reactors) workOne(ctx context.Context, w *workQueue, k workKey) {
	began := r.clock.Now()
	since, caused := w.takeSince(k)
	d, err := r.reconcileKey(ctx, k)
	if ctx.Err() != nil {
		return
	}
	end := r.clock.Now()
	if r.metrics != nil {
		r.metrics.WorkDone(k.kind.String(), end.Sub(began), err != nil)
		if caused && err == nil {
			r.metrics.Reacted(end.Sub(since))
		}
	}
	if err != nil {
		retry := w.q.NumRequeues(k) + 1
		r.log.Warn("work item failed, retrying it alone after a backoff", "work", k.String(), "retry", retry, "err", err)
		if caused {
			// Its event is still not reacted to.
			w.mu.Lock()
			if _, ok := w.since[k]; !ok {
				w.since[k] = since
			}
			w.mu.Unlock()
		}
		w.q.AddRateLimited(k)
		return
	}
	w.q.Forget(k)
	if d > 0 {
		w.q.AddAfter(k, min(d, projections.ReconcilePeriod))
	}
}

// runQueue is Run: the workers, the feeds and a full resync every
// ReconcilePeriod as a safety net.
func (r *Reactors) runQueue(ctx context.Context) error {
	w := r.newWorkQueue()
	r.queue.Store(w)
	defer r.queue.Store(nil)
	if r.metrics != nil {
		r.metrics.ObserveDepth(r.QueueDepth)
	}
	unsubscribe := r.views.Subscribe(func(e events.Event) { r.onEvent(w, e) })
	defer unsubscribe()
	if ow, ok := r.cluster.(ObjectWatcher); ok {
		ow.WatchObjects(func(ch ObjectChange) {
			if r.queue.Load() == w {
				r.onObject(w, ch)
			}
		})
	} else {
		r.log.Warn("the cluster does not say which object changed: every change enqueues every slot")
		go r.watchAnyChange(ctx, w)
	}
	r.enqueueAll(w, "", time.Time{})
	workers := r.workers
	r.log.Info("reactors running", "reactors", len(r.list), "workers", workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx, w)
		}()
	}
	var rs resyncCursor
	resyncAt := r.clock.Now().Add(projections.ReconcilePeriod)
	t := r.clock.NewTimer(projections.ReconcilePeriod)
	for {
		select {
		case <-ctx.Done():
			t.Stop()
			w.q.ShutDown()
			wg.Wait()
			return nil
		case <-t.C():
		}
		now := r.clock.Now()
		slots := rs.takeDue(now)
		var groups []string
		if !now.Before(resyncAt) {
			rs, groups = r.resync(now)
			// slots is the old cursor's: clipped, the append copies.
			slots = append(slices.Clip(slots), rs.takeDue(now)...)
			resyncAt = now.Add(projections.ReconcilePeriod)
		}
		// The next wake is set before any work it enqueues can run: a
		// clock stepped once that work is seen still reaches it.
		wake := resyncAt
		if due, ok := rs.due(); ok {
			wake = earliest(wake, latest(due, now.Add(resyncGrain)))
		}
		t = r.clock.NewTimer(wake.Sub(now))
		for _, s := range slots {
			w.q.Add(slotKey(s))
		}
		for _, g := range groups {
			w.add(scalerKey(g), time.Time{})
			w.add(straysKey(g), time.Time{})
		}
	}
}

// resync begins the periodic safety net: every group's work again (the
// groups returned) and every slot, spread over the period so it never
// puts a whole pool ahead of an event's slot (the cursor).
func (r *Reactors) resync(now time.Time) (resyncCursor, []string) {
	var slots, groups []string
	r.views.Read(func(s *projections.State) {
		slots = make([]string, 0, len(s.Slots))
		for name, sl := range s.Slots {
			if sl.Group != "" {
				slots = append(slots, name)
			}
		}
		for name := range s.Groups {
			groups = append(groups, name)
		}
	})
	return resyncCursor{slots: slots, began: now, step: projections.ReconcilePeriod / time.Duration(max(len(slots), 1))}, groups
}

// resyncGrain is the least time between two batches of a resync's slots.
const resyncGrain = 100 * time.Millisecond

// resyncCursor is a resync of the slots under way: the i-th comes due at
// began + i×step, and the run loop enqueues the slots due in batches, at
// most one every resyncGrain. It holds their names and where it is, not a
// timer in the work queue for each slot.
type resyncCursor struct {
	slots []string
	began time.Time
	step  time.Duration
	next  int
}

// due is when the next slot comes due; false once every slot is taken.
func (c *resyncCursor) due() (time.Time, bool) {
	if c.next >= len(c.slots) {
		return time.Time{}, false
	}
	return c.began.Add(time.Duration(c.next) * c.step), true
}

// takeDue is the slots due at now, not taken before.
func (c *resyncCursor) takeDue(now time.Time) []string {
	from := c.next
	for {
		at, ok := c.due()
		if !ok || at.After(now) {
			break
		}
		c.next++
	}
	return c.slots[from:c.next]
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// watchAnyChange enqueues everything at each change of a cluster that does
// not say what changed.
func (r *Reactors) watchAnyChange(ctx context.Context, w *workQueue) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.cluster.Changed():
			r.enqueueAll(w, "", time.Time{})
		}
	}
}

// QueueDepth is how many work items wait (0 when the reactors do not run).
func (r *Reactors) QueueDepth() int {
	if w := r.queue.Load(); w != nil {
		return w.q.Len()
	}
	return 0
}
