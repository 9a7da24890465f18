package projections_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// A start folds from the newest snapshot: of a log of 9 events with a
// snapshot at seq 6, it reads the 3 after it, and builds the views a fold
// of the whole log builds.
func TestStartReadsOnlyTheEventsAfterTheSnapshot(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), "")
	if err != nil {
		t.Fatal(err)
	}
	declareSlots(t, st, 5) // seq 1-6
	first := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
	if err := first.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := first.SnapshotNow(ctx); err != nil {
		t.Fatal(err)
	}
	for i := 5; i < 8; i++ { // seq 7-9
		name := fmt.Sprintf("s%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}}); err != nil {
			t.Fatal(err)
		}
	}

	before := st.Stats().Decoded
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if read := st.Stats().Decoded - before; read != 3 {
		t.Errorf("a start from the snapshot at seq 6 read %d events of the log, want the 3 after it", read)
	}
	if r.SnapshotSeq() != 6 || r.Seq() != 9 {
		t.Errorf("started from snapshot %d to seq %d, want 6 and 9", r.SnapshotSeq(), r.Seq())
	}

	whole := projections.NewRunner(st, projections.RunnerOptions{Logger: quietLog()})
	if err := whole.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := canonical(t, r), canonical(t, whole); !bytes.Equal(got, want) {
		t.Errorf("views from the snapshot differ from a fold of the whole log:\n%s\nwant\n%s", got, want)
	}
}
