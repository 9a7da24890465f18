package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/claimstream/claimstream/events"
)

// Fencing by the log. A leader's appends are Fenced: the first message of
// each append carries the expectation that the leadership aggregate's last
// event is still the leader's own LeaderElected, so JetStream itself
// refuses the append of a deposed leader, however long it was paused and
// whatever its clock says. A message carries one expectation, so the first
// write's own expectation moves into the process: its aggregate is locked
// for the append and its last sequence checked against what this leader
// last wrote or read from the stream's leader. That is exact, since while
// the fence holds nobody else can append. Every other write of the append
// keeps its expectation on the server.

// ErrFenced is matched (errors.Is) by an append the log refused because a
// newer leader was elected since the fence was taken: the writer no longer
// leads and must not act.
var ErrFenced = errors.New("a newer leader was elected: the log refused the write of a deposed leader")

// FencedError is the typed ErrFenced.
type FencedError struct {
	// Fence is the seq of the writer's LeaderElected; Now the leadership
	// aggregate's last seq when the append was refused (0: unknown).
	Fence, Now uint64
}

func (e *FencedError) Error() string {
	if e.Now == 0 {
		return fmt.Sprintf("%v (this leader's LeaderElected is seq %d)", ErrFenced, e.Fence)
	}
	return fmt.Sprintf("%v (this leader's LeaderElected is seq %d, the leadership's last event seq %d)", ErrFenced, e.Fence, e.Now)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

type fenceKey struct{}

// Fenced returns ctx whose appends land only while the leadership
// aggregate's last event is the one at seq (the writer's LeaderElected).
func Fenced(ctx context.Context, seq uint64) context.Context {
	return context.WithValue(ctx, fenceKey{}, seq)
}

func fenceOf(ctx context.Context) (uint64, bool) {
	seq, ok := ctx.Value(fenceKey{}).(uint64)
	return seq, ok && seq > 0
}

// fencing is the in-process half of fenced appends: a lock per aggregate,
// and the aggregates' last sequences as this leader knows them, valid for
// one fence.
type fencing struct {
	mu    sync.Mutex
	fence uint64
	last  map[events.Aggregate]uint64
	locks map[events.Aggregate]*aggregateLock
}

type aggregateLock struct {
	ch   chan struct{}
	refs int
}

// lock takes the locks of aggs (in a fixed order: no two appends wait on
// each other) and returns their release.
func (f *fencing) lock(ctx context.Context, aggs []events.Aggregate) (func(), error) {
	slices.SortFunc(aggs, func(a, b events.Aggregate) int {
		if a.Kind != b.Kind {
			if a.Kind < b.Kind {
				return -1
			}
			return 1
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	var held []events.Aggregate
	release := func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, a := range held {
			l := f.locks[a]
			<-l.ch
			if l.refs--; l.refs == 0 {
				delete(f.locks, a)
			}
		}
	}
	for _, a := range aggs {
		f.mu.Lock()
		if f.locks == nil {
			f.locks = map[events.Aggregate]*aggregateLock{}
		}
		l := f.locks[a]
		if l == nil {
			l = &aggregateLock{ch: make(chan struct{}, 1)}
			f.locks[a] = l
		}
		l.refs++
		f.mu.Unlock()
		select {
		case l.ch <- struct{}{}:
			held = append(held, a)
		case <-ctx.Done():
			f.mu.Lock()
			if l.refs--; l.refs == 0 {
				delete(f.locks, a)
			}
			f.mu.Unlock()
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

// known returns the last seq of agg this leader knows under fence.
func (f *fencing) known(fence uint64, agg events.Aggregate) (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fence != fence {
		f.fence, f.last = fence, map[events.Aggregate]uint64{}
	}
	seq, ok := f.last[agg]
	return seq, ok
}

// learn records agg's last seq under fence; forget drops what an append
// of unknown outcome may have changed.
func (f *fencing) learn(fence uint64, agg events.Aggregate, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fence != fence {
		f.fence, f.last = fence, map[events.Aggregate]uint64{}
	}
	f.last[agg] = seq
}

func (f *fencing) forget(aggs []events.Aggregate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, a := range aggs {
		delete(f.last, a)
	}
}

// lastSeqAtLeader is agg's last seq as the stream's leader answers it (0:
// no event).
func (s *Store) lastSeqAtLeader(ctx context.Context, agg events.Aggregate) (uint64, error) {
	e, err := s.LastFromLeader(ctx, agg)
	if errors.Is(err, ErrNoEvent) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return e.Seq, nil
}

// appendFenced is AppendWrites under a fence: the writes' aggregates
// locked, the first write's expectation checked here, the fence's on the
// server.
func (s *Store) appendFenced(ctx context.Context, fence uint64, writes []events.Write) (AppendResult, error) {
	var aggs []events.Aggregate
	first := -1
	for i, w := range writes {
		if len(w.Events) == 0 {
			continue
		}
		if first < 0 {
			first = i
		}
		aggs = append(aggs, w.Aggregate)
	}
	if first < 0 {
		return AppendResult{}, fmt.Errorf("append: no events")
	}
	// A log known unwritable refuses at once, before any request to the
	// stream's leader (as guardAppend does for the publish).
	if h := s.cfg.Health; h != nil {
		if err := h.Err(); err != nil {
			h.failed(WriteFailureUnwritable)
			return AppendResult{}, fmt.Errorf("append to %s: %w", s.cfg.Stream, err)
		}
	}
	release, err := s.fence.lock(ctx, slices.Clone(aggs))
	if err != nil {
		return AppendResult{}, fmt.Errorf("append to %s: %w", aggregatesNamed(writes), err)
	}
	defer release()
	w := writes[first]
	last, ok := s.fence.known(fence, w.Aggregate)
	if !ok {
		if last, err = s.lastSeqAtLeader(ctx, w.Aggregate); err != nil {
			// Nothing was sent: a refusal the caller may retry.
			return AppendResult{}, &LogUnwritableError{Reason: fmt.Sprintf("the last event of %s could not be read from the stream's leader before the write: %v", w.Aggregate, err)}
		}
		s.fence.learn(fence, w.Aggregate, last)
	}
	if last != w.Expected && !s.expiredBefore(ctx, w.Expected, last) {
		return AppendResult{}, &ConflictError{Aggregate: w.Aggregate, Expected: w.Expected,
			Message: "the aggregate's last event is seq " + strconv.FormatUint(last, 10)}
	}
	res, err := s.appendUnfenced(ctx, writes)
	if err != nil {
		s.fence.forget(aggs)
		if errors.Is(err, ErrConflict) {
			// The fence's expectation or another write's: which one the
			// server does not say, the leadership's last event does.
			if now, lerr := s.lastSeqAtLeader(ctx, events.Leadership()); lerr == nil && now != fence {
				return AppendResult{}, &FencedError{Fence: fence, Now: now}
			}
		}
		return res, err
	}
	for _, e := range res.Events {
		s.fence.learn(fence, e.Aggregate, e.Seq)
	}
	return res, nil
}

// expiredBefore reports whether an expectation of seq expected meets an
// aggregate whose events all expired (the leader knows none: last 0).
func (s *Store) expiredBefore(ctx context.Context, expected, last uint64) bool {
	if last != 0 || expected == 0 {
		return false
	}
	b, err := s.Bounds(ctx)
	return err == nil && b.Truncated() && expected < b.First
}
