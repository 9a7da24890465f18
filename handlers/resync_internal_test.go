package handlers

import (
	"fmt"
	"testing"
	"time"

	"github.com/claimstream/claimstream/projections"
)

// A resync's slots come due spread over the period and are taken in
// order, each once: those due by each instant, all of them by the
// period's end.
func TestAResyncTakesItsSlotsAsTheyComeDue(t *testing.T) {
	const n = 10_000
	slots := make([]string, n)
	for i := range slots {
		slots[i] = fmt.Sprintf("node-%d.lan", i)
	}
	began := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	c := resyncCursor{slots: slots, began: began, step: projections.ReconcilePeriod / n}
	var taken []string
	for at := time.Duration(0); at < projections.ReconcilePeriod; at += resyncGrain {
		taken = append(taken, c.takeDue(began.Add(at))...)
		if want := int(at/c.step) + 1; len(taken) != want {
			t.Fatalf("%v into the resync %d slots taken, want %d", at, len(taken), want)
		}
		if due, ok := c.due(); !ok || !due.After(began.Add(at)) {
			t.Fatalf("%v into the resync the next slot is due at %v (%v)", at, due.Sub(began), ok)
		}
	}
	taken = append(taken, c.takeDue(began.Add(projections.ReconcilePeriod))...)
	if len(taken) != n {
		t.Fatalf("%d slots taken by the period's end, want %d", len(taken), n)
	}
	for i, s := range taken {
		if s != slots[i] {
			t.Fatalf("slot %d taken is %s, want %s", i, s, slots[i])
		}
	}
	if _, ok := c.due(); ok {
		t.Fatal("a slot is still due after every slot was taken")
	}
	if more := c.takeDue(began.Add(time.Hour)); len(more) != 0 {
		t.Fatalf("%d slots taken again", len(more))
	}
}
