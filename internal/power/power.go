// Package power switches machines on and off through their own power
// controls (a Wake-on-LAN packet, a BMC), for the lifecycle Jobs that
// run `claimstream power`.
//
// A Driver acts and reads; Wait asks for a state and watches the machine
// reach it, so that a Job succeeds only once the machine is where it was
// asked to be.
package power

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// PowerState is what a driver saw of a machine's power.
type PowerState string

const (
	On      PowerState = "on"
	Off     PowerState = "off"
	Unknown PowerState = "unknown"
)

// Reading is one look at a machine: its power state and the driver's own
// name for it (a MAC, a BMC address).
type Reading struct {
	State PowerState
	ID    string
}

// Driver switches one machine. On and Off ask for the state and return
// once the request was accepted, not once the machine got there (Wait
// watches for that).
type Driver interface {
	On(ctx context.Context) error
	Off(ctx context.Context) error
	Status(ctx context.Context) (Reading, error)
}

// The failures an operator acts on. Drivers wrap them with the detail
// (errors.Is finds them); their text leads the message.
var (
	// ErrCredentials: the power controller refused the user or password.
	ErrCredentials = errors.New("wrong credentials")
	// ErrUnreachable: nothing answered at the controller's address.
	ErrUnreachable = errors.New("unreachable")
	// ErrNotReached: the request was accepted but the machine did not get
	// to the state in time.
	ErrNotReached = errors.New("never reached the state")
	// ErrUnsupported: the driver cannot do this (Wake-on-LAN cannot
	// switch a machine off).
	ErrUnsupported = errors.New("not supported by this driver")
)

// Reason is a failure's short name, for a Job's failure reason and the
// command's exit code.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrCredentials):
		return "WrongCredentials"
	case errors.Is(err, ErrUnreachable):
		return "Unreachable"
	case errors.Is(err, ErrNotReached):
		return "StateNotReached"
	case errors.Is(err, ErrUnsupported):
		return "Unsupported"
	}
	return "Failed"
}

// Outcome is what Wait did.
type Outcome struct {
	// Reading is the last status seen.
	Reading Reading
	// Already: the machine was in the asked state before anything was
	// sent, and nothing was.
	Already bool
	// Took is the time from the request to the state.
	Took time.Duration
}

// Options bound Wait.
type Options struct {
	// Timeout bounds the whole action, from the first status to the
	// last: with zero, a machine not already there fails once asked.
	Timeout time.Duration
	// Interval is the time between two status polls.
	Interval time.Duration
	// Clock is the real clock when nil.
	Clock clock.Clock
}

// Wait brings d to want (On or Off): a machine already there is left
// alone; otherwise it asks, then polls Status until the machine reports
// want or the timeout passes. Wrong credentials end it at once; a status
// poll that fails otherwise (a BMC that drops a packet while the machine
// boots) is retried until the timeout, and named in the timeout's error.
func Wait(ctx context.Context, d Driver, want PowerState, o Options) (Outcome, error) {
	if want != On && want != Off {
		return Outcome{}, fmt.Errorf("power state %q: want on or off", want)
	}
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	start := clk.Now()
	deadline := start.Add(o.Timeout)
	r, err := d.Status(ctx)
	if err != nil {
		return Outcome{Reading: r}, err
	}
	if r.State == want {
		return Outcome{Reading: r, Already: true}, nil
	}
	act := d.On
	if want == Off {
		act = d.Off
	}
	if err := act(ctx); err != nil {
		return Outcome{Reading: r}, err
	}
	var lastErr error
	for {
		left := deadline.Sub(clk.Now())
		if left <= 0 {
			msg := fmt.Errorf("%w: %s was still %s %s after asking for %s", ErrNotReached, idOr(r.ID, "the machine"), r.State, o.Timeout, want)
			if lastErr != nil {
				msg = fmt.Errorf("%w (last status error: %v)", msg, lastErr)
			}
			return Outcome{Reading: r, Took: clk.Since(start)}, msg
		}
		select {
		case <-ctx.Done():
			return Outcome{Reading: r, Took: clk.Since(start)}, ctx.Err()
		case <-clk.After(min(o.Interval, left)):
		}
		got, err := d.Status(ctx)
		switch {
		case errors.Is(err, ErrCredentials), errors.Is(err, ErrNotReached):
			// Wrong credentials stay wrong; a controller that says the
			// state will not come (an action it could not finish) is
			// believed.
			return Outcome{Reading: r, Took: clk.Since(start)}, err
		case err != nil:
			lastErr = err
			continue
		}
		r, lastErr = got, nil
		if r.State == want {
			return Outcome{Reading: r, Took: clk.Since(start)}, nil
		}
	}
}

func idOr(id, alt string) string {
	if id == "" {
		return alt
	}
	return id
}
