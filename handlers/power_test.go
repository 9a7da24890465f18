package handlers_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
)

// powerFacts reads the slot's MachinePoweredOn/Off events in log order.
func (e *renv) powerFacts(slot string) []events.Data {
	e.t.Helper()
	var out []events.Data
	err := e.h.Store.ReadAggregate(context.Background(), events.SlotAggregate(slot), func(ev events.Event) error {
		switch ev.Data.(type) {
		case events.MachinePoweredOn, events.MachinePoweredOff:
			out = append(out, ev.Data)
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// A claimed machine: on at its Ready condition's time, off at its NotReady
// condition's time after the claim's shutdown, once each however many
// passes run.
func TestPowerFactsOfAClaimedMachine(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	e.passes()
	c := e.claim("a")
	e.finishJob(c.StartupJob, true, "")
	e.register("a", false)
	e.step(10 * time.Second)
	readyAt := e.h.Clock.Now().UTC()
	e.setReady("a", true)
	e.step(7 * time.Second) // observed later than the condition says
	e.passes()
	e.passes()
	facts := e.powerFacts("a")
	if len(facts) != 1 {
		t.Fatalf("power facts %+v, want one MachinePoweredOn", facts)
	}
	on, ok := facts[0].(events.MachinePoweredOn)
	if !ok || !on.At.Equal(readyAt) || on.AtSource != events.AtNodeCondition || on.Claim != c.Name || on.Node != "a" {
		t.Fatalf("on = %+v, want at %s from the node condition, claim %s", facts[0], readyAt, c.Name)
	}

	e.h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "cluster-autoscaler"})
	e.passes()
	for j := range e.jobs() {
		e.finishJob(j, true, "")
	}
	e.step(20 * time.Second)
	offAt := e.h.Clock.Now().UTC()
	e.setReady("a", false)
	e.step(3 * time.Second)
	e.passes()
	facts = e.powerFacts("a")
	if len(facts) != 2 {
		t.Fatalf("power facts %+v, want on then off", facts)
	}
	off, ok := facts[1].(events.MachinePoweredOff)
	if !ok || !off.At.Equal(offAt) || off.AtSource != events.AtNodeCondition || off.Reason != events.PowerOffShutdown || off.Claim != c.Name {
		t.Fatalf("off = %+v, want at %s, reason shutdown, claim %s", facts[1], offAt, c.Name)
	}
}

// An unclaimed machine: the input law's shutdown is its reason; the Node
// deleted afterwards writes nothing more (it is already off). A Ready Node
// deleted is recorded off at the observation.
func TestPowerFactsOfUnclaimedMachinesAndNodeDeletion(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a", "b")
	e.register("a", true)
	e.register("b", true)
	e.passes()
	for j := range e.jobs() {
		e.finishJob(j, true, "")
	}
	e.setReady("a", false)
	e.passes()
	if err := e.f.DeleteNodeObject(context.Background(), "b"); err != nil {
		t.Fatal(err)
	}
	e.step(5 * time.Second)
	deletedSeen := e.h.Clock.Now().UTC()
	e.passes()
	e.step(handlers.ShutdownSettle)
	e.passes()

	a := e.powerFacts("a")
	if len(a) != 2 {
		t.Fatalf("slot a power facts %+v, want on then off", a)
	}
	if on := a[0].(events.MachinePoweredOn); on.Claim != "" || on.AtSource != events.AtNodeCondition {
		t.Fatalf("a on = %+v, want no claim, from the node condition", on)
	}
	if off := a[1].(events.MachinePoweredOff); off.Reason != events.PowerOffInputLaw || off.Claim != "" {
		t.Fatalf("a off = %+v, want the input law's shutdown", off)
	}
	b := e.powerFacts("b")
	if len(b) != 2 {
		t.Fatalf("slot b power facts %+v, want on then off", b)
	}
	if off := b[1].(events.MachinePoweredOff); off.Reason != events.PowerOffNodeDeleted || off.AtSource != events.AtObserved || !off.At.Equal(deletedSeen) {
		t.Fatalf("b off = %+v, want node-deleted observed at %s", off, deletedSeen)
	}
}

// A condition time before the slot's last power fact (a stale or skewed
// clock) is not used: the fact takes the observation time, so the facts
// stay in order.
func TestPowerFactIgnoresAConditionBeforeTheLastFact(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, true, "a")
	e.register("a", true)
	e.passes() // on; the input law fires (no shutdown lands)
	e.step(time.Minute)
	if err := e.f.SetNodeReady(context.Background(), "a", false, e.h.Clock.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	e.passes()
	facts := e.powerFacts("a")
	if len(facts) != 2 {
		t.Fatalf("power facts %+v, want on then off", facts)
	}
	off := facts[1].(events.MachinePoweredOff)
	if off.AtSource != events.AtObserved || !off.At.Equal(e.h.Clock.Now().UTC()) {
		t.Fatalf("off = %+v, want the observation time", off)
	}
}

// A log an older version wrote holds the Node observed Ready and no power
// fact: the first pass writes MachinePoweredOn at the Node's condition
// time, and nothing else (the Node did not change).
func TestPowerFactOfAMachineUpBeforeTheUpgrade(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	e.increase("g", 1)
	readyAt := e.h.Clock.Now().UTC()
	e.register("a", true)
	if err := e.cl.Settle(context.Background()); err != nil {
		t.Fatal(err)
	}
	n, _ := e.cl.Node("a")
	sl := e.slot("a")
	c := e.claim("a")
	res, err := e.h.Store.Append(context.Background(), events.SlotAggregate("a"), sl.Seq, events.Event{Time: e.h.Clock.Now().UTC(),
		Data: events.NodeObserved{Ref: events.Ref{Slot: "a", Group: "g", Claim: c.Name, Cause: "an older observer"}, Node: n.State()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.h.Views.WaitFor(context.Background(), res.Last); err != nil {
		t.Fatal(err)
	}
	e.step(time.Minute)
	e.pass()
	facts := e.powerFacts("a")
	if len(facts) != 1 {
		t.Fatalf("power facts %+v, want one MachinePoweredOn", facts)
	}
	if on := facts[0].(events.MachinePoweredOn); !on.At.Equal(readyAt) || on.AtSource != events.AtNodeCondition || on.Claim != c.Name {
		t.Fatalf("on = %+v, want at %s from the node condition, claim %s", on, readyAt, c.Name)
	}
}
