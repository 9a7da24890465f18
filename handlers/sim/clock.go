package sim

import (
	"time"

	"k8s.io/utils/clock"
)

// ScaledClock is real time sped up: Now advances Speed times faster than
// the wall clock, and timers fire after d/Speed of real time. It lets
// `serve` (with no kubeconfig, the simulator) run a 15-minute story in under a minute.
type ScaledClock struct {
	Speed float64
	start time.Time
	real  time.Time
}

var _ clock.Clock = (*ScaledClock)(nil)

// NewScaledClock starts a scaled clock at the current time.
func NewScaledClock(speed float64) *ScaledClock {
	if speed <= 0 {
		speed = 1
	}
	now := time.Now()
	return &ScaledClock{Speed: speed, start: now, real: now}
}

// ResumeFrom moves a clock that has not started running yet to t when t
// is later than its Now: a restarted simulation continues from the last
// time its log recorded instead of the wall clock, which a sped-up run left
// behind (events "in the future" would show negative ages). Call it before
// the clock is shared.
func (c *ScaledClock) ResumeFrom(t time.Time) {
	if t.After(c.Now()) {
		c.start, c.real = t, time.Now()
	}
}

func (c *ScaledClock) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.Speed)
}

// Now is the simulated time.
func (c *ScaledClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.real)) * c.Speed))
}

// Since is the simulated time since t.
func (c *ScaledClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// After fires after d of simulated time.
func (c *ScaledClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTimer fires after d of simulated time.
func (c *ScaledClock) NewTimer(d time.Duration) clock.Timer {
	ch := make(chan time.Time, 1)
	t := time.AfterFunc(c.scale(d), func() {
		select {
		case ch <- c.Now():
		default:
		}
	})
	return &scaledTimer{c: c, t: t, ch: ch}
}

// Sleep sleeps d of simulated time.
func (c *ScaledClock) Sleep(d time.Duration) { time.Sleep(c.scale(d)) }

// Tick ticks every d of simulated time.
func (c *ScaledClock) Tick(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	tk := time.NewTicker(c.scale(d))
	go func() {
		for range tk.C {
			select {
			case ch <- c.Now():
			default:
			}
		}
	}()
	return ch
}

type scaledTimer struct {
	c  *ScaledClock
	t  *time.Timer
	ch chan time.Time
}

func (t *scaledTimer) C() <-chan time.Time { return t.ch }
func (t *scaledTimer) Stop() bool          { return t.t.Stop() }
func (t *scaledTimer) Reset(d time.Duration) bool {
	return t.t.Reset(t.c.scale(d))
}

// NewTicker ticks every d of simulated time (the reactors' work queue
// takes a clock with tickers). The ticks carry wall-clock times: only
// their rhythm is used.
func (c *ScaledClock) NewTicker(d time.Duration) clock.Ticker {
	return scaledTicker{time.NewTicker(c.scale(d))}
}

type scaledTicker struct{ t *time.Ticker }

func (t scaledTicker) C() <-chan time.Time { return t.t.C }
func (t scaledTicker) Stop()               { t.t.Stop() }
