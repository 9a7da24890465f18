package events_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

func leaderElectedMsg(t testing.TB, epoch uint64) *nats.Msg {
	t.Helper()
	e := events.Event{ID: "id-le", Source: "/claimstream/serve", Time: eventstest.T0, Epoch: epoch,
		Data: events.LeaderElected{Replica: "claimstream-1", Epoch: epoch, GRPCAddress: "10.0.0.5:8086", APIAddress: "10.0.0.5:8087", Cause: "key-value lease claimstream-leader"}}
	m, err := eventlog.ToMsg(e, subjects.Subject(events.Leadership(), events.TypeLeaderElected))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// LeaderElected lives on the leadership aggregate and passes the strict
// envelope decoder; every event carries its writer's epoch in a header.
func TestLeaderElectedAndTheEpochHeaderRoundTrip(t *testing.T) {
	m := leaderElectedMsg(t, 4)
	if m.Subject != "cs.leadership.claimstream.LeaderElected" {
		t.Fatalf("subject %s", m.Subject)
	}
	e := events.FromMsg(subjects, m.Subject, 9, m.Header, m.Data)
	if e.Err != nil {
		t.Fatal(e.Err)
	}
	d, ok := e.Data.(events.LeaderElected)
	if !ok || d.Replica != "claimstream-1" || d.Epoch != 4 || d.GRPCAddress != "10.0.0.5:8086" || e.Epoch != 4 || e.Aggregate != events.Leadership() {
		t.Fatalf("decoded %+v", e)
	}
	// An event of a writer that had no epoch decodes with Epoch 0.
	old := goodMsg(t)
	if e := events.FromMsg(subjects, old.Subject, 1, old.Header, old.Data); e.Err != nil || e.Epoch != 0 {
		t.Fatalf("old event: %+v", e)
	}
	withEpoch := goodMsg(t)
	withEpoch.Header.Set(events.HeaderEpoch, "12")
	if e := events.FromMsg(subjects, withEpoch.Subject, 1, withEpoch.Header, withEpoch.Data); e.Err != nil || e.Epoch != 12 {
		t.Fatalf("epoch header: %+v", e)
	}
}

func TestFromMsgRefusesABadEpochOrAForgedLeadershipSubject(t *testing.T) {
	for name, spoil := range map[string]func(m *nats.Msg){
		"epoch not a number": func(m *nats.Msg) { m.Header.Set(events.HeaderEpoch, "four") },
		"negative epoch":     func(m *nats.Msg) { m.Header.Set(events.HeaderEpoch, "-1") },
		"ce-subject":         func(m *nats.Msg) { m.Header.Set(events.HeaderSubject, "claimstream-2") },
		"other aggregate":    func(m *nats.Msg) { m.Subject = "cs.leadership.other.LeaderElected" },
		"on a group":         func(m *nats.Msg) { m.Subject = "cs.group.claimstream.LeaderElected" },
	} {
		m := leaderElectedMsg(t, 3)
		spoil(m)
		if e := events.FromMsg(subjects, m.Subject, 7, m.Header, m.Data); e.Err == nil {
			t.Errorf("%s: accepted %+v", name, e)
		}
	}
}
