package projections_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/projections"
)

// damagedLog writes a group and 29 slots (30 events; slot sK at seq K+2),
// stops the server, damages the block file and starts it again.
func damagedLog(t *testing.T, damage func(*eventstest.Server)) (*eventlog.Store, *eventstest.Server) {
	t.Helper()
	srv := eventstest.StartServer(t)
	declareSlots(t, srv.Store(), 29)
	srv.Stop()
	damage(srv)
	srv.Start()
	return srv.Store(), srv
}

// startBounded starts r and fails the test if Start does not return well
// within a minute (before gaps were detected it waited forever).
func startBounded(t *testing.T, r *projections.Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
}

func truncateLast(srv *eventstest.Server) { srv.TruncateBlock("CLAIMSTREAM", 100) }

func flipSlot15(srv *eventstest.Server) {
	srv.FlipBlockBytes("CLAIMSTREAM", []byte("cs.slot.s15.SlotDeclared"), 40)
}

func TestRunnerStartsOnATruncatedLogAndRefusesWrites(t *testing.T) {
	st, _ := damagedLog(t, truncateLast)
	logs, logger := logcapture.New(slog.LevelInfo)
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: logger})
	startBounded(t, r)

	if got := r.Gaps(); !slices.Equal(got, eventlog.Gaps{{First: 30, Last: 30}}) {
		t.Fatalf("gaps %v, want seq 30", got)
	}
	if !strings.Contains(logs.String(), `level=ERROR msg="the event log has a gap: views built without the missing events" missing="sequence 30 is missing from the log"`) {
		t.Fatalf("no error line naming the missing sequence:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "writes are refused") {
		t.Fatalf("the log does not say what is done about it:\n%s", logs.String())
	}
	// The stream's own state agrees: it marked 30 deleted and lost bytes.
	if !strings.Contains(logs.String(), `level=WARN msg="the log's file store reports lost data" viewsSeq=29 missing="sequence 30 is missing from the log" lostBytes=`) {
		t.Fatalf("no line with the stream's own report:\n%s", logs.String())
	}
	err := r.WritesRefused()
	if !errors.Is(err, projections.ErrWritesRefused) || !strings.Contains(err.Error(), "sequence 30 is missing from the log") {
		t.Fatalf("writes refused: %v", err)
	}
	// The lost last event is not waited for: the views count as caught up.
	ok, last, err := r.CaughtUp(context.Background())
	if err != nil || !ok || last != 30 || r.Seq() != 29 {
		t.Fatalf("caught up %v at %d (views %d): %v", ok, last, r.Seq(), err)
	}
	if p, blocking := r.Problem(); !blocking || !strings.Contains(p, "sequence 30 is missing") {
		t.Fatalf("problem %q blocking %v", p, blocking)
	}
}

func TestRunnerOverADamagedRecordNamesItAndAcceptsWritesOnlyWhenTold(t *testing.T) {
	st, _ := damagedLog(t, flipSlot15)
	logs, logger := logcapture.New(slog.LevelInfo)
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: logger})
	startBounded(t, r)
	if got := r.Gaps(); !slices.Equal(got, eventlog.Gaps{{First: 17, Last: 17}}) {
		t.Fatalf("gaps %v, want seq 17", got)
	}
	if !strings.Contains(logs.String(), `missing="sequence 17 is missing from the log"`) {
		t.Fatalf("no line naming the missing sequence:\n%s", logs.String())
	}
	r.Read(func(s *projections.State) {
		if s.Slots["s15"] != nil || s.Slots["s16"] == nil || s.Seq != 30 {
			t.Fatalf("views: s15 %v, s16 %v, seq %d", s.Slots["s15"], s.Slots["s16"], s.Seq)
		}
	})
	if err := r.WritesRefused(); err == nil || !strings.Contains(err.Error(), "sequence 17 is missing from the log") || !strings.Contains(err.Error(), "--accept-log-gaps") {
		t.Fatalf("writes refused: %v", err)
	}

	accepting := projections.NewRunner(st, projections.RunnerOptions{Logger: logger, AcceptGaps: true})
	startBounded(t, accepting)
	if err := accepting.WritesRefused(); err != nil {
		t.Fatalf("gaps accepted, yet: %v", err)
	}
	if p, blocking := accepting.Problem(); blocking || !strings.Contains(p, "sequence 17 is missing") {
		t.Fatalf("problem %q blocking %v", p, blocking)
	}
	if !slices.Equal(accepting.Gaps(), eventlog.Gaps{{First: 17, Last: 17}}) {
		t.Fatalf("gaps %v", accepting.Gaps())
	}
}

func TestRunnerWritesNoSnapshotOverAGap(t *testing.T) {
	// A snapshot past the gap would let the next start miss it.
	st, _ := damagedLog(t, flipSlot15)
	ctx := context.Background()
	snaps, err := projections.OpenSnapshots(ctx, st.JetStream(), "")
	if err != nil {
		t.Fatal(err)
	}
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quietLog()})
	startBounded(t, r)
	if err := r.SnapshotNow(ctx); err == nil || !strings.Contains(err.Error(), "sequence 17 is missing") {
		t.Fatalf("snapshot over a gap: %v", err)
	}
	if s, err := snaps.Load(ctx); err != nil || s != nil {
		t.Fatalf("a snapshot was saved: %v, %v", s, err)
	}
}

func TestRunnerFindsAGapWhileTailing(t *testing.T) {
	st := eventstest.StartServer(t).Store() // no log validation: the gap is the point
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	declareSlots(t, st, 2) // seq 1..3
	logs, logger := logcapture.New(slog.LevelInfo)
	r := projections.NewRunner(st, projections.RunnerOptions{Logger: logger})
	startBounded(t, r)
	// A limit of one message per subject makes the server drop an event
	// before the runner tails it: the same loss a damaged block causes.
	js := st.JetStream()
	s, err := js.Stream(ctx, st.Stream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgsPerSubject = 1
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	slot := events.SlotAggregate("s9")
	decl := func(cause string) events.Event {
		return events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: "s9", Group: "g", Cause: cause}, Spec: events.SlotSpec{ProviderID: "homelab://s9"}}}
	}
	if _, err := st.Append(ctx, slot, 0, decl("first")); err != nil { // seq 4, dropped by seq 5
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, slot, 4, decl("second")); err != nil { // seq 5
		t.Fatal(err)
	}
	if r.WritesRefused() != nil {
		t.Fatal("writes refused before the gap was met")
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	if err := r.WaitFor(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if got := r.Gaps(); !slices.Equal(got, eventlog.Gaps{{First: 4, Last: 4}}) {
		t.Fatalf("gaps %v, want seq 4", got)
	}
	if err := r.WritesRefused(); err == nil || !strings.Contains(err.Error(), "sequence 4 is missing from the log") {
		t.Fatalf("writes refused: %v", err)
	}
	if !strings.Contains(logs.String(), `missing="sequence 4 is missing from the log"`) || !strings.Contains(logs.String(), "during=tail") {
		t.Fatalf("no line naming the gap met while tailing:\n%s", logs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotWatermarkMovesOnlyAfterTheSaveSucceeds(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := st.JetStream()
	snaps, err := projections.OpenSnapshots(ctx, js, "")
	if err != nil {
		t.Fatal(err)
	}
	logs, logger := logcapture.New(slog.LevelInfo)
	r := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, SnapshotEvery: 5, Logger: logger})
	startBounded(t, r)
	// The bucket goes away under the runner: every save fails.
	if err := js.DeleteObjectStore(ctx, "claimstream-snapshots"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	declareSlots(t, st, 6) // seq 1..7: a snapshot is due at 5
	if err := r.WaitFor(ctx, 7); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(logs.String(), "write snapshot failed, trying again later") {
			return errors.New("no failed snapshot yet")
		}
		return nil
	})
	if got := r.SnapshotSeq(); got != 0 {
		t.Fatalf("the watermark moved to %d though no snapshot was saved", got)
	}
	// The bucket is back: the next due snapshot lands and moves the mark.
	if _, err := projections.OpenSnapshots(ctx, js, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		name := fmt.Sprintf("t%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}}}); err != nil {
			t.Fatal(err)
		}
	}
	eventstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		s, err := snaps.Load(ctx)
		if err != nil {
			return err
		}
		if s == nil || r.SnapshotSeq() != s.Seq {
			return fmt.Errorf("saved %v, watermark %d", s != nil, r.SnapshotSeq())
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
