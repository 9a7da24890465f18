package serve

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
)

// leadNow makes a test's plane the leader (its elector, from the options,
// is usually leader.Always) and waits until its LeaderElected is in the
// views, as serve does before any leader-only work. The plane's views must
// be running.
func leadNow(t testing.TB, ctx context.Context, p *plane) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.lead.elector.Run(ctx, func(ctx context.Context) {
			if _, err := p.lead.leadership.Elect(ctx, "", "", "test", nil); err != nil && ctx.Err() == nil {
				t.Errorf("elect: %v", err)
			}
			<-ctx.Done()
			p.lead.leadership.StepDown()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	eventstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if p.lead.leadership.Epoch() == 0 {
			return errors.New("not leading yet")
		}
		return nil
	})
}
