package projections

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// Register adds p to the runner's fold. Registered before Start, p is
// restored with the views from their snapshot and folds the same events
// as they do. Registered after, p is first built from the log up to the
// views' sequence (a read of the log for p alone, which holds the fold
// meanwhile): for a projection that was not known at start.
func (r *Runner) Register(ctx context.Context, p Projection) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	select {
	case <-r.started:
	default:
		r.mu.Lock()
		r.projs = append(r.projs, p)
		r.mu.Unlock()
		return nil
	}
	if err := r.buildLate(ctx, p); err != nil {
		return fmt.Errorf("projection %s: %w", p.Name(), err)
	}
	r.mu.Lock()
	r.projs = append(r.projs, p)
	r.mu.Unlock()
	return nil
}

// buildLate folds the log up to the views' sequence into p alone. The
// caller holds applyMu: the views stay where they are.
func (r *Runner) buildLate(ctx context.Context, p Projection) error {
	upTo := r.Seq()
	b, err := r.store.Bounds(ctx)
	if err != nil {
		return err
	}
	st := NewState()
	if b.First > 1 {
		// The views of a checkpoint, which holds no projection's part:
		// p begins there without the history before it.
		cst, _, err := r.cp.store.coveringCheckpoint(ctx, b, func(cp CheckpointInfo) bool { return cp.Seq <= upTo })
		if err != nil {
			// Nothing holds the expired events: p begins at the views
			// as they are.
			r.mu.RLock()
			defer r.mu.RUnlock()
			return p.Restore(r.state, nil)
		}
		st = cst
		r.log.Warn("a projection begins without the history the log no longer holds", "projection", p.Name(), "seq", st.Seq, "firstSeq", b.First)
	}
	if err := p.Restore(st, nil); err != nil {
		return err
	}
	err = r.store.Read(ctx, st.Seq+1, upTo, func(e events.Event) error {
		_ = Evolve(st, e)
		p.Apply(st, e)
		return nil
	})
	if eventlog.GapsOf(err) != nil {
		// Folded around the gap, as the views were.
		err = nil
	}
	return err
}

// restoreProjections restores every projection at st from the parts
// next reads, one at a time (next nil: none), for a log of bounds b. When
// one has no usable part and the log still holds its start, every model
// is folded from there instead (one read of the log for all): it returns
// the views to fold the log into.
func (r *Runner) restoreProjections(st *State, next func() (string, Part, error), b eventlog.Bounds) *State {
	if len(r.projs) == 0 {
		return st
	}
	restored := make(map[string]bool, len(r.projs))
	for next != nil {
		name, part, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.log.Warn("the snapshot's parts are unreadable", "seq", st.Seq, "err", err)
			break
		}
		p := r.projectionNamed(name)
		if p == nil {
			continue // a part of a projection this serve does not fold
		}
		if err := p.Restore(st, part); err != nil {
			r.log.Warn("a projection's part of the snapshot is unusable", "projection", name, "seq", st.Seq, "err", err)
			continue
		}
		restored[name] = true
	}
	wholeLog := b.First <= 1
	var unusable []string
	for _, p := range r.projs {
		if restored[p.Name()] {
			continue
		}
		if st.Seq > 0 && wholeLog {
			unusable = append(unusable, p.Name())
			continue
		}
		if st.Seq > 0 {
			r.log.Warn("a projection begins without the history the log no longer holds", "projection", p.Name(), "seq", st.Seq, "firstSeq", b.First)
		}
		_ = p.Restore(st, nil)
	}
	if len(unusable) == 0 {
		return st
	}
	r.log.Info("the snapshot holds no usable part for some projections; folding the log from its start for all", "projections", unusable, "snapshot", st.Seq)
	st = NewState()
	r.lastSnap.Store(0)
	r.nextSnap.Store(r.every)
	for _, p := range r.projs {
		_ = p.Restore(st, nil)
	}
	return st
}

func (r *Runner) projectionNamed(name string) Projection {
	for _, p := range r.projs {
		if p.Name() == name {
			return p
		}
	}
	return nil
}

// storedLocked is the stored snapshot of the views and every
// projection's part, compressed as they are encoded, and the sequence of
// its last event; the caller holds mu.
func (r *Runner) storedLocked() ([]byte, uint64, error) {
	parts := make([]snapshotPart, 0, len(r.projs))
	for _, p := range r.projs {
		parts = append(parts, snapshotPart{name: p.Name(), write: p.WritePart})
	}
	return encodeSnapshotParts(r.state, parts)
}

// StartProgress is how far Start's fold is: the last event folded and the
// log's last when it began. done once the views are built.
func (r *Runner) StartProgress() (folded, of uint64, done bool) {
	select {
	case <-r.started:
		done = true
	default:
	}
	return r.startFolded.Load(), r.startTarget.Load(), done
}
