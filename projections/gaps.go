package projections

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/claimstream/claimstream/events/eventlog"
)

// logGaps is what the runner knows of sequences missing from the log: the
// views hold every event that was delivered, and none of these.
type logGaps struct {
	mu     sync.Mutex
	gaps   eventlog.Gaps
	accept bool
}

// noteGaps records gaps found while building ("start") or keeping
// ("tail") the views and says, once per new sequence, what is missing and
// what the runner does about it. It does not take r.mu.
func (r *Runner) noteGaps(gaps eventlog.Gaps, during string) {
	r.gaps.mu.Lock()
	var fresh eventlog.Gaps
	for _, g := range gaps {
		fresh = append(fresh, r.gaps.gaps.Add(g.First, g.Last)...)
	}
	all := slices.Clone(r.gaps.gaps)
	accept := r.gaps.accept
	r.gaps.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	action := "writes are refused until the log is restored from a backup or serve runs with --accept-log-gaps"
	if accept {
		action = "writes go on (--accept-log-gaps): the views lack these events"
	}
	attrs := []any{"missing", fresh.String(), "events", fresh.Count(), "during", during, "action", action}
	if len(all) != len(fresh) || all.Count() != fresh.Count() {
		attrs = append(attrs, "allMissing", all.String())
	}
	r.log.Error("the event log has a gap: views built without the missing events", attrs...)
}

// Gaps is the sequences missing from the log that the views were built
// without (nil when the log is whole).
func (r *Runner) Gaps() eventlog.Gaps {
	r.gaps.mu.Lock()
	defer r.gaps.mu.Unlock()
	return slices.Clone(r.gaps.gaps)
}

// ErrWritesRefused is matched (errors.Is) by WritesRefused's error.
var ErrWritesRefused = fmt.Errorf("views built over a gap in the log refuse writes")

// GapRefusal is why views built over a gap refuse writes.
type GapRefusal struct{ Gaps eventlog.Gaps }

func (e *GapRefusal) Error() string {
	return fmt.Sprintf("writes refused: the views were built over a damaged log (%s); restore the data dir from a backup, or restart serve with --accept-log-gaps to write without those events", e.Gaps)
}

// Is makes errors.Is(err, ErrWritesRefused) true.
func (e *GapRefusal) Is(target error) bool { return target == ErrWritesRefused }

// WritesRefused is nil when the views may decide writes, and a
// *GapRefusal naming the missing sequences when they were built over a gap
// and gaps are not accepted.
func (r *Runner) WritesRefused() error {
	r.gaps.mu.Lock()
	defer r.gaps.mu.Unlock()
	if len(r.gaps.gaps) == 0 || r.gaps.accept {
		return nil
	}
	return &GapRefusal{Gaps: slices.Clone(r.gaps.gaps)}
}

// Problem says, for readiness, what is wrong with the views ("" when
// nothing is), and whether it stops them serving (writes refused).
func (r *Runner) Problem() (problem string, blocking bool) {
	problem, blocking = r.gapProblem()
	if cp := r.checkpointProblem(); cp != "" {
		problem = joinWhy(problem, cp)
	}
	if rs := r.ReaderStatus(); rs.Down {
		problem = joinWhy(problem, rs.Reason)
	}
	return problem, blocking
}

func (r *Runner) gapProblem() (problem string, blocking bool) {
	r.gaps.mu.Lock()
	defer r.gaps.mu.Unlock()
	if len(r.gaps.gaps) == 0 {
		return "", false
	}
	if r.gaps.accept {
		return fmt.Sprintf("views built over a gap: %s (writes accepted: --accept-log-gaps)", r.gaps.gaps), false
	}
	return fmt.Sprintf("views built over a gap: %s (writes refused)", r.gaps.gaps), true
}

// checkStreamDamage compares the views with what the stream itself reports
// lost. Lost sequences the views read past were reported by the read; ones
// at or below the snapshot's are in the snapshot, so the views are whole,
// but a rebuild from the log would miss them.
func (r *Runner) checkStreamDamage(ctx context.Context, viewsSeq uint64) {
	d, err := r.store.Damage(ctx)
	if err != nil {
		r.log.Warn("cannot read the log's state for lost data", "err", err)
		return
	}
	if d.Empty() {
		return
	}
	attrs := []any{"viewsSeq", viewsSeq}
	if len(d.Deleted) > 0 {
		attrs = append(attrs, "missing", d.Deleted.String())
	}
	if len(d.LostMsgs) > 0 {
		attrs = append(attrs, "lostMsgs", d.LostMsgs)
	}
	if d.LostBytes > 0 {
		attrs = append(attrs, "lostBytes", d.LostBytes)
	}
	var inSnapshot eventlog.Gaps
	snap := r.lastSnap.Load()
	for _, g := range d.Deleted {
		if g.First <= snap {
			inSnapshot.Add(g.First, min(g.Last, snap))
		}
	}
	if len(inSnapshot) > 0 {
		attrs = append(attrs, "heldBySnapshot", fmt.Sprintf("the snapshot at seq %d still holds sequences %s", snap, inSnapshot.Ranges()))
	}
	r.log.Warn("the log's file store reports lost data", attrs...)
}
