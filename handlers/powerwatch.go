package handlers

import (
	"context"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
)

// PowerReader reads a machine's power state through its slot's power
// driver (a BMC, a hypervisor, a probe): "on", "off" or "unknown", and the
// driver's name for the machine.
type PowerReader interface {
	PowerStatus(ctx context.Context, slot string, p *events.Power) (state, reading string, err error)
}

// PowerMetrics counts the power watch's readings by driver and outcome
// (on, off, unknown, failed).
type PowerMetrics interface {
	PowerRead(driver, outcome string)
}

// DefaultPowerWatchInterval is how often PowerWatch reads a Node-less
// slot's power driver.
const DefaultPowerWatchInterval = time.Minute

// powerReadTimeout bounds one reading: a BMC that does not answer must not
// hold the slot's pass.
const powerReadTimeout = 20 * time.Second

// PowerWatch reads the power driver of a slot that has one, no Node and no
// live claim, every interval, and records the state it reads (decide.ObservePower):
// a machine switched on by hand is seen before its kubelet joins, and the
// input law switches it off when no claim wants it. Where a Node exists,
// the Observer's reading of it rules.
type PowerWatch struct {
	base
	reader  PowerReader
	every   time.Duration
	metrics PowerMetrics

	mu     sync.Mutex
	readAt map[string]time.Time // slot -> last reading
	failed map[string]string    // slot -> last error logged
}

func newPowerWatch(b base, r PowerReader, every time.Duration, m PowerMetrics) *PowerWatch {
	if every <= 0 {
		every = DefaultPowerWatchInterval
	}
	return &PowerWatch{base: b, reader: r, every: every, metrics: m, readAt: map[string]time.Time{}, failed: map[string]string{}}
}

func (r *PowerWatch) count(driver, outcome string) {
	if r.metrics != nil {
		r.metrics.PowerRead(driver, outcome)
	}
}

func (r *PowerWatch) Name() string { return "powerwatch" }

func (r *PowerWatch) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	v := r.view(slot)
	if !v.Exists || v.Slot.Group == "" || v.Slot.Node.Present || v.Live != nil {
		r.forget(slot)
		return 0, nil
	}
	p := specPower(v.Slot.Spec)
	if p == nil {
		r.forget(slot)
		return 0, nil
	}
	now := r.now()
	r.mu.Lock()
	last, seen := r.readAt[slot]
	r.mu.Unlock()
	if seen && now.Before(last.Add(r.every)) {
		return last.Add(r.every).Sub(now), nil
	}
	rctx, cancel := context.WithTimeout(ctx, powerReadTimeout)
	state, reading, err := r.reader.PowerStatus(rctx, slot, p)
	cancel()
	r.mu.Lock()
	r.readAt[slot] = now
	logged := r.failed[slot]
	if err == nil {
		delete(r.failed, slot)
	} else {
		r.failed[slot] = err.Error()
	}
	r.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		r.count(p.Driver, "failed")
		if logged != err.Error() {
			r.log.Warn("power driver unreadable: the machine's state is not known until it answers", "slot", slot, "driver", p.Driver, "err", err)
		}
		return r.every, nil
	}
	if logged != "" {
		r.log.Info("power driver readable again", "slot", slot, "driver", p.Driver, "state", state)
	}
	if state != "on" && state != "off" {
		r.count(p.Driver, "unknown")
		return r.every, nil
	}
	r.count(p.Driver, state)
	if _, err := r.exec(ctx, r.Name(), decide.ObservePower{Slot: slot, On: state == "on", Reading: reading}); err != nil {
		return 0, err
	}
	return r.every, nil
}

func (r *PowerWatch) forget(slot string) {
	r.mu.Lock()
	delete(r.readAt, slot)
	delete(r.failed, slot)
	r.mu.Unlock()
}

// specPower is the power driver that switches a slot's machine: its
// shutdown Job's, else its startup Job's; nil when neither is a driver.
func specPower(spec events.SlotSpec) *events.Power {
	for _, j := range []*events.JobSpec{spec.Shutdown, spec.Startup} {
		if j != nil && j.Power != nil && j.Power.Driver != events.PowerExec {
			return j.Power
		}
	}
	return nil
}
