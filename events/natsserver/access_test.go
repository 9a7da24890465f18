package natsserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/internal/logcapture"
)

const (
	readerUser     = "reader"
	readerPassword = "correct horse battery staple"
	deadLetters    = "CLAIMSTREAM_DEADLETTER"
	sinkConsumer   = "sink-alerts"
)

// listening starts an embedded server with a client port on 127.0.0.1 and
// one read-only subscriber, and opens the event store on the process's own
// connection, with a dead-letter stream, a sink's durable consumer and the
// subscribers' copies as serve has them.
func listening(t *testing.T) (*natsserver.Embedded, *eventlog.Store) {
	t.Helper()
	return listeningWith(t, t.TempDir(), 0)
}

func listeningWith(t *testing.T, dir string, subscriberConsumers int) (*natsserver.Embedded, *eventlog.Store) {
	t.Helper()
	emb, st, copies := listeningLogged(t, dir, subscriberConsumers, nil)
	keep(t, copies)
	return emb, st
}

func listeningLogged(t *testing.T, dir string, subscriberConsumers int, log *slog.Logger) (*natsserver.Embedded, *eventlog.Store, *natsserver.SubscriberCopies) {
	t.Helper()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{
		Dir: dir, NoSync: true, Listen: true, Host: "127.0.0.1", Port: -1,
		Access: natsserver.Access{
			Subscribers:         []natsserver.Subscriber{{User: readerUser, Password: readerPassword}},
			Streams:             []string{"CLAIMSTREAM", deadLetters},
			SubscriberConsumers: subscriberConsumers,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: deadLetters, Subjects: []string{"csdl.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{Durable: sinkConsumer, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy}); err != nil {
		t.Fatal(err)
	}
	copies, err := emb.SubscriberCopies(log)
	if err != nil || copies == nil {
		t.Fatalf("subscribers' copies: %v", err)
	}
	if _, err := copies.Ensure(ctx); err != nil {
		t.Fatalf("subscribers' copies: %v", err)
	}
	return emb, st, copies
}

// keep runs copies as serve does, on a clock that never ticks: the first
// check, then the server's reports alone.
func keep(t *testing.T, copies *natsserver.SubscriberCopies) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		copies.Run(ctx, clocktesting.NewFakeClock(time.Now()))
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// copied waits until the subscribers' copy of stream holds n messages.
func copied(t *testing.T, js jetstream.JetStream, stream string, n uint64) {
	t.Helper()
	// A copy's source whose setup failed (its stream's leader not elected
	// yet, a cluster under load) is set up again only after nats-server's
	// retry backoff, which grows with each failure: the bound covers two.
	eventstest.CheckFor(t, 45*time.Second, 10*time.Millisecond, func() error {
		s, err := js.Stream(context.Background(), stream)
		if err != nil {
			return err
		}
		if got := s.CachedInfo().State.Msgs; got != n {
			return fmt.Errorf("the copy of %s holds %d messages, want %d", stream, got, n)
		}
		return nil
	})
}

// violations collects the server's permission errors of one connection.
type violations struct {
	mu   sync.Mutex
	errs []string
}

func (v *violations) handler(_ *nats.Conn, _ *nats.Subscription, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.errs = append(v.errs, err.Error())
}

// saw waits until the server reported a permissions violation naming subject.
func (v *violations) saw(t *testing.T, subject string) {
	t.Helper()
	eventstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		v.mu.Lock()
		defer v.mu.Unlock()
		for _, e := range v.errs {
			if strings.Contains(e, "Permissions Violation") && strings.Contains(e, subject) {
				return nil
			}
		}
		return errors.New("no permissions violation for " + subject + " in " + strings.Join(v.errs, "; "))
	})
}

func connectReader(t *testing.T, emb *natsserver.Embedded) (*nats.Conn, jetstream.JetStream, *violations) {
	t.Helper()
	v := &violations{}
	nc, err := nats.Connect(emb.ClientURL(), nats.UserInfo(readerUser, readerPassword), nats.ErrorHandler(v.handler))
	if err != nil {
		t.Fatalf("reader connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js, v
}

func TestClientPortRefusesAnonymousAndWrongCredentials(t *testing.T) {
	emb, _ := listening(t)
	if !strings.HasPrefix(emb.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("client URL %q", emb.ClientURL())
	}
	for name, opts := range map[string][]nats.Option{
		"anonymous":      nil,
		"wrong password": {nats.UserInfo(readerUser, "guess")},
		"unknown user":   {nats.UserInfo("admin", readerPassword)},
		"token":          {nats.Token(readerPassword)},
	} {
		nc, err := nats.Connect(emb.ClientURL(), append(opts, nats.NoReconnect())...)
		if err == nil {
			nc.Close()
			t.Fatalf("%s: connected", name)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("%s: got %v, want an authorization error", name, err)
		}
	}
}

func TestClientPortRefusesAnonymousWithoutSubscribers(t *testing.T) {
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: t.TempDir(), NoSync: true, Listen: true, Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	nc, err := nats.Connect(emb.ClientURL(), nats.NoReconnect())
	if err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected to a port with no subscriber configured")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("got %v, want an authorization error", err)
	}
	// The process itself still writes.
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(context.Background(), events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
}

func TestSubscriberReadsAndConsumes(t *testing.T) {
	emb, st := listening(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	_, js, v := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 1)

	s, err := js.Stream(ctx, "CLAIMSTREAM")
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	if s.CachedInfo().State.Msgs != 1 {
		t.Fatalf("stream info says %d messages", s.CachedInfo().State.Msgs)
	}
	raw, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatalf("direct get: %v", err)
	}
	if e := events.FromMsg(st.Subjects(), raw.Subject, raw.Sequence, raw.Header, raw.Data); e.Err != nil || e.Data == nil {
		t.Fatalf("the reader got an undecodable event: %+v", e)
	}
	if _, err := s.GetLastMsgForSubject(ctx, "cs.slot.a.>"); err != nil {
		t.Fatalf("direct get last by subject: %v", err)
	}

	// A durable consumer of its own: create, fetch, ack, and resume.
	cons, err := js.CreateConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{
		Durable: "pager", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubjects: []string{"cs.slot.*.ClaimCreated", "cs.slot.*.ClaimBooting"},
	})
	if err != nil {
		t.Fatalf("create durable consumer: %v", err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 1, eventstest.Booting("a", "a1")); err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(2, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for m := range batch.Messages() {
		got = append(got, m.Subject())
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if batch.Error() != nil || len(got) != 2 {
		t.Fatalf("fetched %v, err %v", got, batch.Error())
	}
	info, err := js.Consumer(ctx, "CLAIMSTREAM", "pager")
	if err != nil {
		t.Fatalf("consumer info: %v", err)
	}
	if info.CachedInfo().AckFloor.Stream != 2 {
		t.Fatalf("ack floor %d, want 2", info.CachedInfo().AckFloor.Stream)
	}
	// Its own durable it may delete.
	if err := js.DeleteConsumer(ctx, "CLAIMSTREAM", "pager"); err != nil {
		t.Fatalf("delete own consumer: %v", err)
	}
	// An ordered consumer (what `nats sub --stream` and Store.Read use).
	oc, err := js.OrderedConsumer(ctx, "CLAIMSTREAM", jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	if m, err := oc.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil || m.Subject() != "cs.slot.a.ClaimCreated" {
		t.Fatalf("ordered consumer next: %v", err)
	}
	// The dead-letter stream is readable too.
	if _, err := js.Stream(ctx, deadLetters); err != nil {
		t.Fatalf("dead-letter stream info: %v", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.errs) > 0 {
		t.Fatalf("a read was refused: %v", v.errs)
	}
}

// TestSubscriberCannotWrite is the attack of an outside client on the
// client port: forging events, writing headerless messages, deleting the
// stream.
func TestSubscriberCannotWrite(t *testing.T) {
	emb, st := listening(t)
	ctx := context.Background()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	nc, js, v := connectReader(t, emb)
	try := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if err := f(ctx); err == nil {
			t.Fatalf("%s: the reader was allowed", what)
		}
	}

	forged, err := eventlog.ToMsg(events.Event{ID: "forged", Time: eventstest.T0, Data: events.SlotDecommissioned{Ref: events.Ref{Slot: "a", Group: "g", Cause: "forged"}, By: "attacker"}}, "cs.slot.a.SlotDecommissioned")
	if err != nil {
		t.Fatal(err)
	}
	try("publish a forged event", func(ctx context.Context) error { _, err := js.PublishMsg(ctx, forged); return err })
	v.saw(t, "cs.slot.a.SlotDecommissioned")
	try("publish a headerless message", func(ctx context.Context) error {
		_, err := js.Publish(ctx, "cs.slot.a.ClaimReady", []byte(`{}`))
		return err
	})
	v.saw(t, "cs.slot.a.ClaimReady")
	if err := nc.Publish("cs.group.g.GroupDeclared", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	v.saw(t, "cs.group.g.GroupDeclared")

	try("delete the stream", func(ctx context.Context) error { return js.DeleteStream(ctx, "CLAIMSTREAM") })
	v.saw(t, "$JS.API.STREAM.DELETE.CLAIMSTREAM")
	try("purge the stream", func(ctx context.Context) error {
		s, err := js.Stream(ctx, "CLAIMSTREAM")
		if err != nil {
			return nil // reading must work: fail loudly below
		}
		return s.Purge(ctx)
	})
	v.saw(t, "$JS.API.STREAM.PURGE.CLAIMSTREAM")
	try("delete a message", func(ctx context.Context) error {
		s, err := js.Stream(ctx, "CLAIMSTREAM")
		if err != nil {
			return nil
		}
		return s.DeleteMsg(ctx, 1)
	})
	v.saw(t, "$JS.API.STREAM.MSG.DELETE.CLAIMSTREAM")
	try("update the stream", func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "CLAIMSTREAM", Subjects: []string{"cs.>"}, MaxMsgs: 1})
		return err
	})
	v.saw(t, "$JS.API.STREAM.UPDATE.CLAIMSTREAM")
	try("create a stream", func(ctx context.Context) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHADOW", Subjects: []string{"shadow.>"}})
		return err
	})
	v.saw(t, "$JS.API.STREAM.CREATE.SHADOW")
	if err := nc.PublishRequest("$JS.API.STREAM.SNAPSHOT.CLAIMSTREAM", nats.NewInbox(), []byte(`{"deliver_subject":"cs.slot.a.SlotDecommissioned"}`)); err != nil {
		t.Fatal(err)
	}
	v.saw(t, "$JS.API.STREAM.SNAPSHOT.CLAIMSTREAM")

	// The ways from the subscribers' account into the process's are the
	// copies' own.
	for _, subject := range []string{"$JS.CS.API.CONSUMER.CREATE.CLAIMSTREAM", "$JS.FC.CLAIMSTREAM.x.1", "$JS.CS.DELIVER.CLAIMSTREAM.M.x"} {
		if err := nc.PublishRequest(subject, nats.NewInbox(), []byte(`{"stream_name":"CLAIMSTREAM","config":{"name":"`+sinkConsumer+`"}}`)); err != nil {
			t.Fatal(err)
		}
		v.saw(t, subject)
	}
	// The process's consumers are not in the subscribers' account: not
	// listed, not found, and a consumer of the same name is the
	// subscriber's own.
	rs, err := js.Stream(ctx, "CLAIMSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	names := rs.ConsumerNames(ctx)
	for n := range names.Name() {
		t.Errorf("the subscriber lists consumer %s of the process", n)
	}
	if err := names.Err(); err != nil {
		t.Fatalf("list its own consumers: %v", err)
	}
	if _, err := js.Consumer(ctx, "CLAIMSTREAM", sinkConsumer); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the sink's consumer from the subscriber: %v, want not found", err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{Durable: sinkConsumer, AckPolicy: jetstream.AckNonePolicy, FilterSubject: "cs.group.>"}); err != nil {
		t.Fatalf("a consumer of its own named like the sink's: %v", err)
	}
	if err := js.DeleteConsumer(ctx, "CLAIMSTREAM", sinkConsumer); err != nil {
		t.Fatalf("delete its own consumer: %v", err)
	}
	// Nor can it watch the process's replies.
	if _, err := nc.SubscribeSync(natsserver.ProcessInboxPrefix + ".>"); err != nil {
		t.Fatal(err)
	}
	v.saw(t, natsserver.ProcessInboxPrefix)

	// Nothing changed: one event, the stream's config and the sink's consumer as they were.
	last, err := st.LastSeq(ctx)
	if err != nil || last != 1 {
		t.Fatalf("the log is at %d (%v), want 1", last, err)
	}
	pjs := st.JetStream()
	s, err := pjs.Stream(ctx, "CLAIMSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.MaxMsgs != -1 || !cfg.DenyDelete || !cfg.DenyPurge {
		t.Fatalf("stream config changed: %+v", cfg)
	}
	c, err := pjs.Consumer(ctx, "CLAIMSTREAM", sinkConsumer)
	if err != nil {
		t.Fatal(err)
	}
	if info := c.CachedInfo(); info.Config.AckPolicy != jetstream.AckExplicitPolicy || info.Delivered.Stream != 0 {
		t.Fatalf("sink consumer touched: %+v", info)
	}
	if _, err := pjs.Stream(ctx, "SHADOW"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the reader's stream: %v", err)
	}
	cjs, err := jetstream.New(emb.SubscribersConn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cjs.Stream(ctx, "SHADOW"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the reader's stream in its own account: %v", err)
	}
}

// A read-only identity must not turn the server into its pen: a push
// consumer delivers where its creator says, and the server, not the
// creator, publishes there. A subscriber's consumers live and deliver in
// the subscribers' account, where no stream takes event subjects, so such a
// consumer writes nothing into the log or the dead letters.
func TestSubscriberCannotWriteThroughADeliverSubject(t *testing.T) {
	emb, st := listening(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	pjs := st.JetStream()
	if _, err := pjs.Publish(ctx, "csdl.alerts", []byte(`{"sink":"alerts"}`)); err != nil {
		t.Fatal(err)
	}
	nc, js, v := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 1)
	copied(t, js, deadLetters, 1)
	for _, subject := range []string{"cs.slot.a.SlotDecommissioned", "csdl.alerts", "cs.>"} {
		if _, err := nc.SubscribeSync(subject); err != nil {
			t.Fatal(err)
		}
		v.saw(t, subject)
	}
	// Each stream into the other.
	into := map[string]string{deadLetters: "cs.slot.a.SlotDecommissioned", "CLAIMSTREAM": "csdl.alerts"}
	for stream, deliver := range into {
		_, _ = js.CreatePushConsumer(ctx, stream, jetstream.ConsumerConfig{DeliverSubject: deliver, DeliverPolicy: jetstream.DeliverAllPolicy})
	}
	// The server is delivering meanwhile: a pull of the reader's is served.
	pull, err := js.CreateConsumer(ctx, deadLetters, jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pull.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatalf("control pull: %v", err)
	}
	if last, err := st.LastSeq(ctx); err != nil || last != 1 {
		t.Fatalf("the log is at %d (%v), want 1", last, err)
	}
	dl, err := pjs.Stream(ctx, deadLetters)
	if err != nil || dl.CachedInfo().State.Msgs != 1 {
		t.Fatalf("dead letters: %v", err)
	}
}

// A push consumer of a subscriber aimed at the subjects the process's own
// consumers listen on (a pull request, a reset, a consumer create, flow
// control) reaches none of them, refused by the server or made: the
// sink's durable delivers what the process pulls, in order, from where it
// was.
func TestSubscriberPushConsumersCannotDriveTheProcessConsumers(t *testing.T) {
	// Without the process removing them, to let them deliver.
	emb, st, _ := listeningLogged(t, t.TempDir(), 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 20 {
		slot := fmt.Sprint("s", i)
		if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, eventstest.Created(slot, "c"+slot)); err != nil {
			t.Fatal(err)
		}
	}
	pjs := st.JetStream()
	sink, err := pjs.Consumer(ctx, "CLAIMSTREAM", sinkConsumer)
	if err != nil {
		t.Fatal(err)
	}
	fetch := func(n int) []uint64 {
		t.Helper()
		b, err := sink.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for m := range b.Messages() {
			md, _ := m.Metadata()
			seqs = append(seqs, md.Sequence.Stream)
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return seqs
	}
	if got := fetch(5); fmt.Sprint(got) != "[1 2 3 4 5]" {
		t.Fatalf("the sink's first pull: %v", got)
	}

	_, js, _ := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 20)
	copied(t, js, deadLetters, 0)
	for _, target := range []string{
		"$JS.API.CONSUMER.MSG.NEXT.CLAIMSTREAM." + sinkConsumer,
		"$JS.API.CONSUMER.RESET.CLAIMSTREAM." + sinkConsumer,
		"$JS.CS.API.CONSUMER.CREATE.CLAIMSTREAM",
		"$JS.FC.CLAIMSTREAM." + sinkConsumer + ".1",
		"$JS.API.STREAM.DELETE.CLAIMSTREAM",
		"$JS.API.STREAM.PURGE.CLAIMSTREAM",
	} {
		aimPushConsumer(ctx, t, js, "CLAIMSTREAM", jetstream.ConsumerConfig{
			DeliverSubject: target, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
		}, false)
	}
	// Let them deliver: a pull of the subscriber's own, served after them.
	pull, err := js.CreateConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pull.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatalf("control pull: %v", err)
	}

	if got := fetch(5); fmt.Sprint(got) != "[6 7 8 9 10]" {
		t.Fatalf("the sink's pull after the subscriber's push consumers: %v, want [6 7 8 9 10]", got)
	}
	info, err := sink.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Delivered.Stream != 10 || info.AckFloor.Stream != 10 || info.NumAckPending != 0 {
		t.Fatalf("the sink's consumer moved: delivered %d, ack floor %d, %d pending; want 10, 10, 0",
			info.Delivered.Stream, info.AckFloor.Stream, info.NumAckPending)
	}
	if last, err := st.LastSeq(ctx); err != nil || last != 20 {
		t.Fatalf("the log is at %d (%v), want 20", last, err)
	}
	// The events delivered as consumer create requests made no consumer.
	ps, err := pjs.Stream(ctx, "CLAIMSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	lister := ps.ConsumerNames(ctx)
	for n := range lister.Name() {
		if n != sinkConsumer && !strings.HasPrefix(n, "JS_MIRROR_") {
			t.Errorf("a consumer %s appeared on the process's stream", n)
		}
	}
}

// strays counts what subscribers' push consumers deliver into the process's
// account through the subjects the copies reach it by: a message on a
// consumer create subject that is not a create request (the copies' and
// the process's own are), and one with a body on a flow-control subject
// (a flow-control reply has none).
type strays struct {
	mu sync.Mutex
	n  map[string]int
}

func watchStrays(t *testing.T, nc *nats.Conn) *strays {
	t.Helper()
	s := &strays{n: map[string]int{}}
	for _, subject := range []string{"$JS.API.CONSUMER.CREATE.>", "$JS.FC.>"} {
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
			var req struct {
				Stream string `json:"stream_name"`
			}
			isRequest := json.Unmarshal(m.Data, &req) == nil && req.Stream != ""
			// A delivery keeps the subject of the event it carries.
			if strings.HasPrefix(m.Subject, "$JS.FC.") && len(m.Data) > 0 ||
				!strings.HasPrefix(m.Subject, "$JS.") ||
				strings.HasPrefix(m.Subject, "$JS.API.") && !isRequest {
				s.mu.Lock()
				s.n[m.Sub.Subject]++
				s.mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *strays) total() (int, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.n {
		n += v
	}
	return n, fmt.Sprint(s.n)
}

// pushConsumers lists the push consumers on the subscribers' copies.
func pushConsumers(ctx context.Context, js jetstream.JetStream) ([]string, error) {
	var push []string
	for _, stream := range []string{"CLAIMSTREAM", deadLetters} {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return nil, err
		}
		l := s.ListConsumers(ctx)
		for ci := range l.Info() {
			if ci.Config.DeliverSubject != "" {
				push = append(push, stream+" > "+ci.Name+" -> "+ci.Config.DeliverSubject)
			}
		}
		if err := l.Err(); err != nil {
			return nil, err
		}
	}
	return push, nil
}

// errCodeInvalidDeliverSubject is nats-server's refusal of a push consumer
// whose deliver subject is one of the server's own: the JetStream API of
// any domain, acknowledgements, flow control, snapshots, advisories.
const errCodeInvalidDeliverSubject jetstream.ErrorCode = 10112

// aimPushConsumer makes, as a subscriber, a push consumer on stream with
// cfg, or its update, and says whether the server took it. The server
// refusing a reserved deliver subject is as safe as the guard removing
// the consumer, and the invariants checked after are the same; any other
// error fails the test.
func aimPushConsumer(ctx context.Context, t *testing.T, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig, update bool) (string, bool) {
	t.Helper()
	var c jetstream.PushConsumer
	var err error
	if update {
		c, err = js.UpdatePushConsumer(ctx, stream, cfg)
	} else {
		c, err = js.CreatePushConsumer(ctx, stream, cfg)
	}
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return c.CachedInfo().Name, true
	case errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeInvalidDeliverSubject:
		return "", false
	}
	t.Fatalf("push consumer on %s -> %s: %v", stream, cfg.DeliverSubject, err)
	return "", false
}

// importTargets are the subjects by which the copies reach the process's
// account, of both streams, as a subscriber's push consumer may name them.
var importTargets = []string{
	"$JS.CS.API.CONSUMER.CREATE.CLAIMSTREAM",
	"$JS.CS.API.CONSUMER.CREATE." + deadLetters,
	"$JS.FC.CLAIMSTREAM.JS_MIRROR_x.abcd",
	"$JS.FC." + deadLetters + ".JS_MIRROR_y.efgh",
}

// flood makes rounds push consumers on each copy for each target, the
// first round durable, and returns by stream the names of those the server
// took (it refuses its reserved subjects).
func flood(ctx context.Context, t *testing.T, js jetstream.JetStream, targets []string, rounds int) map[string][]string {
	t.Helper()
	made := map[string][]string{}
	for round := range rounds {
		for _, stream := range []string{"CLAIMSTREAM", deadLetters} {
			for _, target := range targets {
				cfg := jetstream.ConsumerConfig{DeliverSubject: target, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy}
				if round == 0 {
					cfg.Durable = fmt.Sprintf("aimed-%d", len(made[stream]))
				}
				if name, ok := aimPushConsumer(ctx, t, js, stream, cfg, false); ok {
					made[stream] = append(made[stream], name)
				}
			}
		}
	}
	return made
}

// processReading reads the log through the store (a consumer made and
// deleted each time) until the returned stop is called, which reports the
// first failure.
func processReading(ctx context.Context, st *eventlog.Store) (stop func() error) {
	failed := make(chan error, 1)
	quit := make(chan struct{})
	go func() {
		defer close(failed)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			n := 0
			err := st.Read(rctx, 1, 0, func(events.Event) error { n++; return nil })
			cancel()
			if err == nil && n == 0 {
				err = errors.New("no events")
			}
			if err != nil {
				failed <- fmt.Errorf("the process's read %d during the flood: %w", i, err)
				return
			}
		}
	}()
	return func() error { close(quit); return <-failed }
}

// logAndDeadLetters appends n events and publishes d dead letters.
func logAndDeadLetters(ctx context.Context, t *testing.T, st *eventlog.Store, prefix string, n, d int) {
	t.Helper()
	for i := range n {
		slot := fmt.Sprint(prefix, i)
		if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, eventstest.Created(slot, "c"+slot)); err != nil {
			t.Fatal(err)
		}
	}
	for range d {
		// A dead-letter stream just made on a cluster takes a moment to be
		// reachable from every server: no responders until then.
		if _, err := st.JetStream().Publish(ctx, "csdl.alerts", []byte(`{"sink":"alerts"}`), jetstream.WithRetryAttempts(40)); err != nil {
			t.Fatal(err)
		}
	}
}

// A subscriber's push consumer may name as its deliver subject one of the
// subjects by which the copies reach the process's account (nats-server
// checks a deliver subject against no permission). nats-server starts a
// push consumer's deliveries only for a subscription on exactly that
// subject, and the process's account imports none of them as such; the
// server also refuses the reserved ones ($JS.…) as deliver subjects. A
// flood of push consumers aimed there, on both copies, delivers nothing
// into the process's account, while the copies keep up and the process
// reads and makes consumers. Without the process removing them.
func TestSubscriberPushConsumersAtTheImportsDeliverNothing(t *testing.T) {
	emb, st, _ := listeningLogged(t, t.TempDir(), 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	logAndDeadLetters(ctx, t, st, "s", 200, 50)
	seen := watchStrays(t, emb.Conn)
	nc, js, _ := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 200)
	copied(t, js, deadLetters, 50)

	stop := processReading(ctx, st)
	made := flood(ctx, t, js, importTargets, 12)
	logAndDeadLetters(ctx, t, st, "t", 20, 1)
	copied(t, js, "CLAIMSTREAM", 220)
	copied(t, js, deadLetters, 51)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// Answered after the push consumers had their chance to deliver.
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, where := seen.total(); got != 0 {
		t.Fatalf("%d deliveries of the subscriber's push consumers reached the process's account: %s", got, where)
	}
	for stream, names := range made {
		for _, name := range names {
			c, err := js.PushConsumer(ctx, stream, name)
			if err != nil {
				t.Fatal(err)
			}
			if ci := c.CachedInfo(); ci.Delivered.Stream != 0 {
				t.Fatalf("%s > %s -> %s delivered %d", stream, name, ci.Config.DeliverSubject, ci.Delivered.Stream)
			}
		}
	}
	if got := len(eventstest.ReadAll(t, st)); got != 220 {
		t.Fatalf("the process read %d events, want 220", got)
	}
}

// A push consumer of a subscriber is of use to it only where it may
// subscribe, its inboxes; anywhere else (the imports, the JetStream API of
// its own account, whose every delivery the server queues for all
// accounts), made so or updated so, it is removed within a bound, each
// logged once, naming the subscriber, and counted. A push consumer to the subscriber's inbox and a
// pull consumer stay.
func TestSubscriberPushConsumersOutsideTheirInboxesAreRemoved(t *testing.T) {
	logs := &logcapture.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	emb, st, copies := listeningLogged(t, t.TempDir(), 0, log)
	keep(t, copies)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	logAndDeadLetters(ctx, t, st, "s", 200, 50)
	nc, js, _ := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 200)
	copied(t, js, deadLetters, 50)

	inbox := nats.NewInbox()
	inboxSub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreatePushConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{Durable: "mine", DeliverSubject: inbox, AckPolicy: jetstream.AckNonePolicy}); err != nil {
		t.Fatal(err)
	}
	pull, err := js.CreateConsumer(ctx, deadLetters, jetstream.ConsumerConfig{Durable: "pager", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	stop := processReading(ctx, st)
	targets := append([]string{"$JS.API.STREAM.INFO.CLAIMSTREAM", "$JS.API.DIRECT.GET.CLAIMSTREAM", "elsewhere", "cs.slot.s0.SlotDecommissioned"}, importTargets...)
	made := flood(ctx, t, js, targets, 6)
	aimed := len(made["CLAIMSTREAM"]) + len(made[deadLetters])
	// At least those outside the server's reserved subjects.
	if aimed < 2*2*6 {
		t.Fatalf("the server took %d of the push consumers, want at least the %d outside its reserved subjects", aimed, 2*2*6)
	}
	// Made to an inbox, then turned elsewhere; one turned to the JetStream
	// API is refused by the server or removed.
	for _, to := range []string{"elsewhere.turned", "$JS.API.DIRECT.GET." + deadLetters} {
		turned := jetstream.ConsumerConfig{Durable: "turned", DeliverSubject: nats.NewInbox(), AckPolicy: jetstream.AckNonePolicy}
		if _, err := js.CreatePushConsumer(ctx, deadLetters, turned); err != nil {
			t.Fatal(err)
		}
		turned.DeliverSubject = to
		if _, ok := aimPushConsumer(ctx, t, js, deadLetters, turned, true); ok {
			aimed++
		} else if err := js.DeleteConsumer(ctx, deadLetters, "turned"); err != nil {
			t.Fatal(err)
		}
		eventstest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
			if _, err := js.Consumer(ctx, deadLetters, "turned"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
				return fmt.Errorf("the consumer turned to %s is still there: %v", to, err)
			}
			return nil
		})
	}
	eventstest.CheckFor(t, 15*time.Second, 20*time.Millisecond, func() error {
		push, err := pushConsumers(ctx, js)
		if err != nil {
			return err
		}
		if len(push) != 1 || !strings.HasSuffix(push[0], "> mine -> "+inbox) {
			return fmt.Errorf("push consumers on the copies: %v", push)
		}
		if got := copies.ConsumersRemoved(); got != uint64(aimed) {
			return fmt.Errorf("%d removals counted, want %d", got, aimed)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	logAndDeadLetters(ctx, t, st, "t", 1, 1)
	if _, err := pull.Next(jetstream.FetchMaxWait(5 * time.Second)); err != nil {
		t.Fatalf("the subscriber's pull: %v", err)
	}
	if _, err := inboxSub.NextMsg(5 * time.Second); err != nil {
		t.Fatalf("the subscriber's push consumer to its inbox: %v", err)
	}
	if got := copies.ConsumersRemoved(); got != uint64(aimed) {
		t.Fatalf("%d removals counted, want %d: more than once for one", got, aimed)
	}
	if got := strings.Count(logs.String(), "removed a NATS subscriber's push consumer"); got != aimed {
		t.Fatalf("%d removals logged, want %d:\n%s", got, aimed, logs.String())
	}
	if !strings.Contains(logs.String(), "user="+readerUser) {
		t.Fatalf("the removal does not name the subscriber:\n%s", logs.String())
	}
}

// A stray push consumer made while nobody watched (a durable from before a
// restart) is removed by the first check; the subscriber's own stays.
func TestSubscriberPushConsumerFromBeforeTheStartIsRemoved(t *testing.T) {
	emb, st, copies := listeningLogged(t, t.TempDir(), 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	_, js, _ := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 1)
	inbox := nats.NewInbox()
	for name, deliver := range map[string]string{"left-over": "elsewhere.left-over", "mine": inbox} {
		if _, err := js.CreatePushConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{
			Durable: name, DeliverSubject: deliver, AckPolicy: jetstream.AckNonePolicy,
		}); err != nil {
			t.Fatal(err)
		}
	}
	keep(t, copies)
	eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		push, err := pushConsumers(ctx, js)
		if err != nil || fmt.Sprint(push) != "[CLAIMSTREAM > mine -> "+inbox+"]" {
			return fmt.Errorf("push consumers on the copies: %v (%v)", push, err)
		}
		if got := copies.ConsumersRemoved(); got != 1 {
			return fmt.Errorf("%d removals counted, want 1", got)
		}
		return nil
	})
}

// A copy of more than its consumer's flow-control window keeps up: the
// mirror's flow-control replies reach its consumer through the narrowed
// import, while a push consumer aimed at another stream's flow-control
// subject delivers nothing into the process's account.
func TestSubscriberCopiesFlowControl(t *testing.T) {
	emb, st, _ := listeningLogged(t, t.TempDir(), 0, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	seen := watchStrays(t, emb.Conn)
	nc, js, _ := connectReader(t, emb)
	copied(t, js, "CLAIMSTREAM", 1)
	aimPushConsumer(ctx, t, js, "CLAIMSTREAM", jetstream.ConsumerConfig{
		DeliverSubject: "$JS.FC.KV_snapshots.watcher.abcd", DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
	}, false)
	// Eight windows of the mirror's consumer (2 MiB at first).
	body := []byte(`{"sink":"alerts","pad":"` + strings.Repeat("x", 16<<10) + `"}`)
	const n = 1000
	pjs := st.JetStream()
	for range n {
		if _, err := pjs.PublishAsync("csdl.alerts", body); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-pjs.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatal("publishing the dead letters took too long")
	}
	copied(t, js, deadLetters, n)
	// A request answered after the push consumer's delivery.
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, where := seen.total(); got != 0 {
		t.Fatalf("delivered into the process's account: %d %s", got, where)
	}
}
