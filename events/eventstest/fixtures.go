package eventstest

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// T0 is the instant the fixtures below happen at.
var T0 = time.Date(2026, 3, 4, 9, 38, 15, 0, time.UTC)

// Created is slot's claim created at T0 in group g.
func Created(slot, claim string) events.Event {
	return events.Event{Time: T0, Data: events.ClaimCreated{
		Ref:         events.Ref{Claim: claim, Slot: slot, Group: "g", Attempt: 1, Cause: "test"},
		RequestedAt: T0, RequestedBy: "test", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: "g"},
		DeadlineAt: T0.Add(12 * time.Minute), Budget: events.Duration(12 * time.Minute), TTL: events.Duration(time.Hour),
	}}
}

// Booting is the claim of Created booting a second later.
func Booting(slot, claim string) events.Event {
	return events.Event{Time: T0.Add(time.Second), Data: events.ClaimBooting{
		Ref: events.Ref{Claim: claim, Slot: slot, Group: "g", Attempt: 1, Cause: "test"}, StartupJob: claim + "-start-1",
	}}
}

// ReadAll is every event of st, from the first.
func ReadAll(t testing.TB, st *eventlog.Store) []events.Event {
	t.Helper()
	var out []events.Event
	if err := st.Read(context.Background(), 1, 0, func(e events.Event) error { out = append(out, e); return nil }); err != nil {
		t.Fatalf("read: %v", err)
	}
	return out
}
