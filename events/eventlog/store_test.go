package eventlog_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

func TestAppendExpectationAndConflict(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	slot := events.SlotAggregate("node-1")

	r1, err := st.Append(ctx, slot, 0, eventstest.Created("node-1", "c1"))
	if err != nil {
		t.Fatalf("first append: %v", err)
	}
	if r1.First != 1 || r1.Last != 1 {
		t.Fatalf("first append landed at %d..%d, want 1..1", r1.First, r1.Last)
	}
	// A write to another slot does not disturb node-1's expectation.
	if _, err := st.Append(ctx, events.SlotAggregate("node-2"), 0, eventstest.Created("node-2", "c2")); err != nil {
		t.Fatalf("other slot: %v", err)
	}
	if _, err := st.Append(ctx, slot, 1, eventstest.Booting("node-1", "c1")); err != nil {
		t.Fatalf("append with expectation 1: %v", err)
	}
	// A stale writer that still believes seq 1 is the last one is refused.
	_, err = st.Append(ctx, slot, 1, eventstest.Created("node-1", "c3"))
	if !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("stale append: got %v, want ErrConflict", err)
	}
	var ce *eventlog.ConflictError
	if !errors.As(err, &ce) || ce.Code != 10071 || ce.Aggregate != slot || ce.Expected != 1 {
		t.Fatalf("conflict error = %#v", ce)
	}
	// Expectation 0 means "no event on this slot yet".
	if _, err := st.Append(ctx, slot, 0, eventstest.Created("node-1", "c4")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("append expecting empty slot: got %v, want ErrConflict", err)
	}
	if got := len(eventstest.ReadAll(t, st)); got != 3 {
		t.Fatalf("log holds %d events, want 3", got)
	}
}

func TestAppendDeduplicatesRetry(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	evs := []events.Event{eventstest.Created("node-1", "c1")}
	r1, err := st.Append(ctx, events.SlotAggregate("node-1"), 0, evs...)
	if err != nil {
		t.Fatal(err)
	}
	// The same append again (a retry whose ack was lost) carries the id
	// the first try was given, so nothing new is stored.
	r2, err := st.Append(ctx, events.SlotAggregate("node-1"), 0, evs...)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !r2.Duplicate || r2.Last != r1.Last {
		t.Fatalf("retry: %+v, want duplicate of seq %d", r2, r1.Last)
	}
	if r1.Events[0].ID == "" || r1.Events[0].ID != r2.Events[0].ID {
		t.Fatalf("ids %q %q", r1.Events[0].ID, r2.Events[0].ID)
	}
	if got := len(eventstest.ReadAll(t, st)); got != 1 {
		t.Fatalf("log holds %d events, want 1", got)
	}
}

func TestAppendBatchIsAtomic(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	a, b := events.SlotAggregate("a"), events.SlotAggregate("b")
	if _, err := st.Append(ctx, b, 0, eventstest.Created("b", "b1")); err != nil {
		t.Fatal(err)
	}
	// b is stale (expects 0, has 1): nothing of the batch lands, not even a.
	_, err := st.AppendWrites(ctx,
		events.Write{Aggregate: a, Expected: 0, Events: []events.Event{eventstest.Created("a", "a1")}},
		events.Write{Aggregate: b, Expected: 0, Events: []events.Event{eventstest.Created("b", "b2")}},
	)
	if !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("stale batch: %v, want ErrConflict", err)
	}
	if got := len(eventstest.ReadAll(t, st)); got != 1 {
		t.Fatalf("after refused batch the log holds %d, want 1", got)
	}
	res, err := st.AppendWrites(ctx,
		events.Write{Aggregate: a, Expected: 0, Events: []events.Event{eventstest.Created("a", "a1"), eventstest.Booting("a", "a1")}},
		events.Write{Aggregate: b, Expected: 1, Events: []events.Event{eventstest.Booting("b", "b1")}},
	)
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if res.First != 2 || res.Last != 4 {
		t.Fatalf("batch landed %d..%d, want 2..4", res.First, res.Last)
	}
	all := eventstest.ReadAll(t, st)
	if len(all) != 4 || all[1].Type != events.TypeClaimCreated || all[2].Type != events.TypeClaimBooting || all[3].Aggregate != b {
		t.Fatalf("log after batch: %+v", all)
	}
}

func TestAppendRejectsEventOfAnotherAggregate(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	_, err := st.Append(context.Background(), events.SlotAggregate("a"), 0, eventstest.Created("b", "b1"))
	if err == nil || errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("got %v, want a plain error", err)
	}
}

func TestDottedNamesRoundTrip(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	// node.lan and node-lan must be different aggregates, and a dotted name
	// must not split the subject into more tokens.
	for _, name := range []string{"node.lan", "node-lan", "a.b.c", "x%2Ey"} {
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, eventstest.Created(name, name+"-c")); err != nil {
			t.Fatalf("append %q: %v", name, err)
		}
	}
	all := eventstest.ReadAll(t, st)
	if len(all) != 4 {
		t.Fatalf("got %d events", len(all))
	}
	for i, name := range []string{"node.lan", "node-lan", "a.b.c", "x%2Ey"} {
		if all[i].Err != nil || all[i].Aggregate.Name != name || all[i].Data.Reference().Slot != name {
			t.Fatalf("event %d: %+v", i, all[i])
		}
	}
	if _, err := st.Append(ctx, events.SlotAggregate("node.lan"), 1, eventstest.Booting("node.lan", "node.lan-c")); err != nil {
		t.Fatalf("dotted slot expectation: %v", err)
	}
}

func TestReaderSkipsUnknownAndBadEntries(t *testing.T) {
	st, srv := eventstest.NewStore(t)
	ctx := context.Background()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	js := st.JetStream()
	// A newer writer's type, a message without headers, and bad data, each
	// in a whole envelope as a writer makes it.
	m := nats.NewMsg("cs.slot.a.ClaimTeleported")
	envelope(m, "ClaimTeleported")
	m.Data = []byte(`{}`)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "cs.slot.a.ClaimReady", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	bad := nats.NewMsg("cs.slot.a.ClaimReady")
	envelope(bad, events.TypeClaimReady)
	bad.Data = []byte(`{"node": 7}`)
	if _, err := js.PublishMsg(ctx, bad); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 4, eventstest.Booting("a", "a1")); err != nil {
		t.Fatal(err)
	}
	all := eventstest.ReadAll(t, st)
	if len(all) != 5 {
		t.Fatalf("read %d entries, want 5", len(all))
	}
	if all[0].Err != nil || all[4].Err != nil || all[4].Data == nil {
		t.Fatalf("good entries: %+v / %+v", all[0], all[4])
	}
	for _, e := range all[1:4] {
		if e.Err == nil || e.Data != nil || e.Aggregate.Name != "a" {
			t.Fatalf("bad entry passed through: %+v", e)
		}
	}
	stats := st.Stats()
	if stats.UnknownType != 1 || stats.BadData != 2 || stats.Decoded != 2 {
		t.Fatalf("stats = %+v", stats)
	}
	_ = srv
}

// envelope sets the headers every writer sets, for slot a's claim a1.
func envelope(m *nats.Msg, t events.Type) {
	for k, v := range map[string]string{
		events.HeaderSpecVersion: "1.0", events.HeaderID: "id-" + string(t), events.HeaderSource: "/newer",
		events.HeaderType: events.CEType(t), events.HeaderTime: eventstest.T0.Format(time.RFC3339Nano), events.HeaderSubject: "a1",
		events.HeaderDataSchema: events.SchemaURL(t), events.HeaderContentType: "application/json",
		events.HeaderGroup: "g", events.HeaderSlot: "a", events.HeaderClaim: "a1",
	} {
		m.Header.Set(k, v)
	}
}

func TestReadRangeAndTail(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	for i, s := range []string{"a", "b", "c", "d"} {
		if _, err := st.Append(ctx, events.SlotAggregate(s), 0, eventstest.Created(s, s+"1")); err != nil {
			t.Fatalf("%d: %v", i, err)
		}
	}
	var seqs []uint64
	if err := st.Read(ctx, 2, 3, func(e events.Event) error { seqs = append(seqs, e.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seqs) != 2 || seqs[0] != 2 || seqs[1] != 3 {
		t.Fatalf("range 2..3 read %v", seqs)
	}

	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var tailed []uint64
	done := make(chan error, 1)
	go func() {
		done <- st.Tail(tctx, 3, func(e events.Event) error {
			mu.Lock()
			tailed = append(tailed, e.Seq)
			mu.Unlock()
			return nil
		})
	}()
	if _, err := st.Append(ctx, events.SlotAggregate("e"), 0, eventstest.Created("e", "e1")); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(tailed) != 3 || tailed[2] != 5 {
			return errors.New("tail has not seen seq 5 yet")
		}
		return nil
	})
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("tail ended with %v", err)
	}
}

func TestAcknowledgedEventsSurviveRestart(t *testing.T) {
	srv := eventstest.StartServer(t)
	srv.NoSync = false
	srv.Restart()
	st := srv.Store()
	ctx := context.Background()
	for _, s := range []string{"a", "b.c", "d"} {
		if _, err := st.Append(ctx, events.SlotAggregate(s), 0, eventstest.Created(s, s+"1")); err != nil {
			t.Fatal(err)
		}
	}
	before := eventstest.ReadAll(t, st)
	srv.Restart()
	st = srv.Store()
	after := eventstest.ReadAll(t, st)
	if len(after) != len(before) {
		t.Fatalf("after restart %d events, before %d", len(after), len(before))
	}
	for i := range before {
		if before[i].ID != after[i].ID || before[i].Seq != after[i].Seq {
			t.Fatalf("event %d changed across restart", i)
		}
	}
	// The expectations still hold against the restarted log.
	if _, err := st.Append(ctx, events.SlotAggregate("b.c"), 2, eventstest.Booting("b.c", "b.c1")); err != nil {
		t.Fatalf("append after restart: %v", err)
	}
}

func TestEqualDecisionsFromTwoCallersAreNotMerged(t *testing.T) {
	st, _ := eventstest.NewStore(t)
	ctx := context.Background()
	// Two callers decide the very same event at the same place: it is two
	// requests, so the second meets the expectation, not a dedup.
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "c1")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "c1")); !errors.Is(err, eventlog.ErrConflict) {
		t.Fatalf("second caller: %v, want ErrConflict", err)
	}
}

// recorder captures Errorf calls while passing everything else to the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestValidateLogCatchesSchemaViolations(t *testing.T) {
	srv := eventstest.StartServer(t)
	st := srv.Store()
	ctx := context.Background()
	bad := eventstest.Created("a", "a1")
	c := bad.Data.(events.ClaimCreated)
	c.Attempt = -3
	bad.Data = c
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, bad); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{TB: t}
	eventstest.ValidateLog(rec, st)
	if len(rec.errs) != 1 || !strings.Contains(rec.errs[0], "attempt") {
		t.Fatalf("validation errors: %q", rec.errs)
	}
}
