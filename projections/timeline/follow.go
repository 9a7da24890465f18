package timeline

import (
	"sync"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Following the views' runner. An index that folded the log as far as the
// runner has no more use for views of its own (at 10,000 slots they hold as
// much memory as the runner's): the runner hands it a record of each event
// it folds, taken from its views under their lock right after the fold
// (timelineFeed.publish), and the index applies the records (applyFeed),
// the same records its own folds make. Until it has caught up, and again
// whenever it lost its place in the records (the runner's views replaced,
// or more records waiting than maxFeedRecords), the index builds with views
// of its own from a saved copy, a checkpoint or the log.

// maxFeedRecords bounds the records waiting for the index (about 150 bytes
// each): an index that falls this far behind builds again instead.
const maxFeedRecords = 1 << 16

// timelineFeed is the runner's records of its folds, for the index.
type timelineFeed struct {
	mu sync.Mutex
	// base is the runner's seq when the records began: they continue it
	// without a hole. epoch counts the beginnings; an index that follows
	// records of an older epoch missed some.
	base, epoch uint64
	records     []timelineRecord
	stopped     bool
}

// publish is the runner's hook (projections.Runner.Publish): a record of
// e, or, with no event (the hook's registration, or views the runner
// installed), a new beginning at st's seq.
func (f *timelineFeed) publish(st *projections.State, e *events.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	if e == nil || len(f.records) >= maxFeedRecords {
		f.base, f.records = st.Seq, nil
		f.epoch++
		return
	}
	f.records = append(f.records, recordOf(st, *e))
}

// followViews hooks x to views' folds (Run calls it); the returned func
// unhooks it.
func (x *Index) followViews(views *projections.Runner) (stop func()) {
	if views == nil {
		return func() {}
	}
	f := &timelineFeed{}
	x.mu.Lock()
	x.views, x.feed = views, f
	x.mu.Unlock()
	return views.Publish(f.publish)
}

// following says whether x follows the runner's records (it holds no
// views of its own). The caller holds x.mu.
func (x *Index) following() bool { return x.ok && x.st == nil }

// startFollowing lets x's own views go once the records continue what it
// folded, and applies those it has not folded yet. The caller holds x.mu.
func (x *Index) startFollowing() {
	f := x.feed
	if f == nil || x.st == nil || !x.ok || x.broken != nil {
		return
	}
	f.mu.Lock()
	if f.stopped || x.seq < f.base {
		// The runner is ahead of what the log gave: the next catch-up
		// folds further.
		f.mu.Unlock()
		return
	}
	records := f.records
	f.records = nil
	x.feedEpoch = f.epoch
	f.mu.Unlock()
	x.st = nil
	x.applyRecords(records)
}

// applyFeed applies the records waiting; false when x lost its place in
// them and must build again. The caller holds x.mu.
func (x *Index) applyFeed() bool {
	f := x.feed
	f.mu.Lock()
	if f.epoch != x.feedEpoch || f.stopped {
		f.mu.Unlock()
		return false
	}
	records := f.records
	f.records = nil
	f.mu.Unlock()
	x.applyRecords(records)
	return true
}

// applyRecords applies those of records x has not folded yet.
func (x *Index) applyRecords(records []timelineRecord) {
	for i := range records {
		if records[i].seq > x.seq {
			x.apply(&records[i])
		}
	}
}

// stopFeed ends the records for an index that cannot be built: they
// would only pile up.
func (x *Index) stopFeed() {
	if f := x.feed; f != nil {
		f.mu.Lock()
		f.stopped, f.records = true, nil
		f.mu.Unlock()
	}
}
