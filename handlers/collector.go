package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
)

// Collector drops terminal claims from the live views once their TTL has
// passed (ClaimCollected). Their history stays in the log, and the slot
// keeps the digest of its newest claim.
type Collector struct{ base }

func (r *Collector) Name() string { return "collector" }

func (r *Collector) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	now := r.now()
	var next time.Duration
	for _, cl := range v.Terminal {
		if cl.FinishedAt.IsZero() {
			continue
		}
		end := cl.FinishedAt.Add(cl.TTL.D())
		if now.Before(end) {
			if d := after(now, end); next == 0 || d < next {
				next = d
			}
			continue
		}
		if _, err := r.exec(ctx, r.Name(), decide.CollectClaim{Claim: cl.Name}); err != nil {
			return 0, err
		}
	}
	return next, nil
}
