package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
)

// FollowerReadWait bounds how long a follower waits for its views to reach
// the log's last sequence before it answers a read.
const FollowerReadWait = 2 * time.Second

// FreshReads is asked before a read is answered from the views (the
// provider's TargetSize, NodeGroupNodes..., the REST API's GETs). The
// leader's views hold every write it made; a follower's may lag the log,
// so it waits (FollowerReadWait) until they reach the log's last sequence,
// else refuses with Unavailable "views N events behind".
func (l *Leadership) FreshReads(ctx context.Context) error {
	if l.Leads() {
		return nil
	}
	last, err := l.store.LastSeq(ctx)
	if err != nil {
		return decide.Refuse(decide.CodeUnavailable, "cannot read the log's last sequence: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, FollowerReadWait)
	defer cancel()
	if err := l.views.WaitFor(wctx, last); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		seq := l.views.Seq()
		return decide.Refuse(decide.CodeUnavailable, "views %d events behind the log (at seq %d of %d after %s); retry shortly", last-min(seq, last), seq, last, FollowerReadWait)
	}
	return nil
}
