package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/provider/rest"
)

// follower is `events --follow` across server restarts: when the stream
// ends or the server cannot be reached, it says so on stderr, waits with
// backoff, and asks again from the sequence after the last event it
// printed, so no event is printed twice and none is skipped. It ends only
// when ctx ends (Ctrl-C) or the server refuses the request itself (a bad
// filter, a wrong token), which is an error.
type follower struct {
	c      *rest.Client
	stderr io.Writer
	// initial and max bound the wait between attempts (defaults 250ms, 10s).
	initial, max time.Duration
	clk          clock.Clock // default: the real clock
}

func (f *follower) events(ctx context.Context, q rest.EventQuery, fn func(rest.Event) error) error {
	initial, maxWait := f.initial, f.max
	if initial <= 0 {
		initial = 250 * time.Millisecond
	}
	if maxWait <= 0 {
		maxWait = 10 * time.Second
	}
	clk := f.clk
	if clk == nil {
		clk = clock.RealClock{}
	}
	var last uint64
	seen := false
	wait := initial
	gone := false
	for {
		q.OnOpen = func() {
			if gone {
				fmt.Fprintf(f.stderr, "resumed at seq %d\n", max(q.From, 1))
				gone = false
			}
			wait = initial
		}
		err := f.c.Events(ctx, q, func(e rest.Event) error {
			if seen && e.Seq <= last {
				return nil // never twice
			}
			if err := fn(e); err != nil {
				return err
			}
			last, seen = e.Seq, true
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		var ae *rest.APIError
		if errors.As(err, &ae) && ae.Status != http.StatusServiceUnavailable && ae.Status < 500 {
			return err // the server refuses the request itself: retrying cannot help
		}
		if seen {
			// Resume after the last event printed; --last applied once.
			q.From, q.Last = last+1, 0
		}
		why := "the server ended the stream"
		if err != nil {
			why = err.Error()
		}
		if !gone {
			fmt.Fprintf(f.stderr, "server gone (%s), reconnecting from seq %d\n", why, max(q.From, 1))
			gone = true
		} else {
			fmt.Fprintf(f.stderr, "still unreachable (%s), next try in %s\n", why, wait)
		}
		t := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		wait = min(2*wait, maxWait)
	}
}
