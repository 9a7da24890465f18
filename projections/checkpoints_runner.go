package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// runnerCheckpoints is the runner's side of checkpoints: the schedule and
// the newest one taken.
type runnerCheckpoints struct {
	store  *Checkpoints
	policy CheckpointPolicy
	clock  clock.Clock

	mu      sync.Mutex
	newest  CheckpointInfo
	takenAt time.Time
	// failing is the last save's error while saves fail ("" once one
	// lands), since when they do.
	failing      string
	failingSince time.Time
	retryAt      time.Time
	failures     atomic.Uint64
	busy         atomic.Bool
}

// CheckpointFailures counts the checkpoints that could not be saved
// (metric claimstream_checkpoint_failures_total).
func (r *Runner) CheckpointFailures() uint64 { return r.cp.failures.Load() }

// checkpointProblem says, for readiness, that checkpoints fail: the views
// serve on, but events that expire with no checkpoint covering them would
// stop the next start.
func (r *Runner) checkpointProblem() string {
	r.cp.mu.Lock()
	defer r.cp.mu.Unlock()
	if r.cp.failing == "" {
		return ""
	}
	return fmt.Sprintf("checkpoints failing since %s (%s): events that expire with none covering them stop the next start", r.cp.failingSince.UTC().Format(time.RFC3339), r.cp.failing)
}

// checkpointRetry is how long the schedule waits after a failed checkpoint.
const checkpointRetry = time.Minute

func (r *Runner) noteCheckpointFailure(err error) {
	r.cp.failures.Add(1)
	r.cp.mu.Lock()
	defer r.cp.mu.Unlock()
	now := r.cp.clock.Now()
	if r.cp.failing == "" {
		r.cp.failingSince = now
	}
	// Not again at every event: a broken bucket would flood the log.
	r.cp.retryAt = now.Add(checkpointRetry)
	r.cp.failing = err.Error()
}

// Checkpoints is the runner's checkpoint store (nil: none configured).
func (r *Runner) Checkpoints() *Checkpoints { return r.cp.store }

// CheckpointSeq is the sequence of the newest checkpoint taken or found at
// start (0: none).
func (r *Runner) CheckpointSeq() uint64 {
	r.cp.mu.Lock()
	defer r.cp.mu.Unlock()
	return r.cp.newest.Seq
}

// startCheckpoints learns the newest stored checkpoint; its last event's
// time stands for when it was taken.
func (r *Runner) startCheckpoints(ctx context.Context) error {
	if r.cp.store == nil {
		return nil
	}
	cps, err := r.cp.store.List(ctx)
	if err != nil {
		return err
	}
	if n := len(cps); n > 0 {
		r.cp.mu.Lock()
		r.cp.newest, r.cp.takenAt = cps[n-1], cps[n-1].Time
		r.cp.mu.Unlock()
	}
	return nil
}

// runCheckpointTicker checks the schedule every Interval, so events that
// came and then stopped are still covered before they expire.
func (r *Runner) runCheckpointTicker(ctx context.Context) {
	if r.cp.store == nil {
		return
	}
	every := r.cp.policy.withDefaults().Interval
	go func() {
		for {
			t := r.cp.clock.NewTimer(every)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C():
				r.maybeCheckpoint(ctx)
			}
		}
	}()
}

// maybeCheckpoint takes a checkpoint in the background when one is due.
func (r *Runner) maybeCheckpoint(ctx context.Context) {
	if r.cp.store == nil || !r.writes() {
		return
	}
	r.cp.mu.Lock()
	newest, takenAt, retryAt := r.cp.newest, r.cp.takenAt, r.cp.retryAt
	r.cp.mu.Unlock()
	now := r.cp.clock.Now()
	if now.Before(retryAt) || !r.cp.policy.CheckpointDue(newest, takenAt, r.Seq(), now) {
		return
	}
	if len(r.Gaps()) > 0 {
		// Said once, at the gap; a checkpoint past it would hide it.
		return
	}
	if !r.cp.busy.CompareAndSwap(false, true) {
		return
	}
	go func() {
		_, err := r.CheckpointNow(ctx)
		r.cp.busy.Store(false)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Error("checkpoint failed, trying again at the next check", "err", err)
			}
			return
		}
		// Folds during the save skipped their look at the schedule; look
		// once more so a checkpoint they made due is not left for the next
		// interval when no further event comes.
		r.maybeCheckpoint(ctx)
	}()
}

// CheckpointNow saves a checkpoint of the current views, then prunes the
// stored ones by the policy. Views built over a gap are not checkpointed:
// a checkpoint past the gap would hide it from every later rebuild.
func (r *Runner) CheckpointNow(ctx context.Context) (CheckpointInfo, error) {
	if r.cp.store == nil {
		return CheckpointInfo{}, errors.New("no checkpoint store configured")
	}
	if gaps := r.Gaps(); len(gaps) > 0 {
		return CheckpointInfo{}, fmt.Errorf("no checkpoint of views built over a gap (%s)", gaps)
	}
	r.mu.RLock()
	// The views alone: checkpoints are kept by the hundred, and the
	// projections' parts (the cost index grows with the history) live in
	// the one snapshot.
	b, seq, err := encodeSnapshot(r.state)
	last := r.lastEventTime
	r.mu.RUnlock()
	if err != nil {
		return CheckpointInfo{}, err
	}
	if seq == 0 {
		return CheckpointInfo{}, errors.New("no checkpoint of empty views")
	}
	if last.IsZero() {
		e, err := r.store.Get(ctx, seq)
		if err != nil {
			return CheckpointInfo{}, fmt.Errorf("time of the checkpoint's last event %d: %w", seq, err)
		}
		last = e.Time
	}
	begin := time.Now()
	info, err := r.cp.store.save(ctx, b, seq, last)
	if err != nil {
		r.noteCheckpointFailure(err)
		return CheckpointInfo{}, err
	}
	now := r.cp.clock.Now()
	r.cp.mu.Lock()
	if info.Seq >= r.cp.newest.Seq {
		r.cp.newest, r.cp.takenAt = info, now
	}
	r.cp.failing = ""
	r.cp.mu.Unlock()
	r.log.Info("checkpoint saved", "seq", info.Seq, "lastEvent", info.Time.Format(time.RFC3339), "bytes", info.Size, "took", time.Since(begin).Round(time.Millisecond))
	if err := r.pruneCheckpoints(ctx, now); err != nil {
		r.log.Warn("checkpoint pruning failed, trying again after the next checkpoint", "err", err)
	}
	return info, nil
}

func (r *Runner) pruneCheckpoints(ctx context.Context, now time.Time) error {
	cps, err := r.cp.store.List(ctx)
	if err != nil {
		return err
	}
	for _, seq := range r.cp.policy.Prune(cps, now) {
		if err := r.cp.store.Delete(ctx, seq); err != nil {
			return err
		}
		r.log.Info("checkpoint pruned", "seq", seq)
	}
	return nil
}

func joinWhy(parts ...string) string {
	var out string
	for _, p := range parts {
		if p == "" {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += p
	}
	return out
}
