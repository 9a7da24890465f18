package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
)

// Deadline fails a claim in the boot window (pending or booting) past its
// deadlineAt: failed/DeadlineExceeded with a force shutdown. A ready claim
// has no deadline (the move to ready cleared it) and is never touched.
type Deadline struct{ base }

func (r *Deadline) Name() string { return "deadline" }

func (r *Deadline) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	cl := v.Live
	if cl == nil || !cl.InBootWindow() || cl.DeadlineAt == nil {
		return 0, nil
	}
	now := r.now()
	if !cl.Overdue(now) {
		return after(now, *cl.DeadlineAt), nil
	}
	_, err := r.exec(ctx, r.Name(), decide.ExpireDeadline{Claim: cl.Name})
	return 0, err
}
