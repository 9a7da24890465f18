// Package sinks delivers the log's events to HTTP webhooks as CloudEvents.
//
// Each sink has a durable JetStream pull consumer on the event stream
// (sink-<name>, filtered to its types, explicit acks, one message in flight
// so delivery is in log order). The delivery loop fetches one event, skips
// what the sink's filters exclude, sends it with the CloudEvents sdk-go
// HTTP client, retrying with exponential backoff on the injected clock, and
// acks only after the receiver answered 2xx. A restart resumes from the
// consumer, so a healthy sink receives every event once, in order. An event
// that keeps failing past MaxAttempts is recorded on the dead-letter stream
// (CLAIMSTREAM_DEADLETTER, subject csdl.<sink>), counted, acked, and the
// sink goes on.
package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/client"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// Metrics is told of every delivery outcome; telemetry.Metrics implements
// it. A nil Metrics counts nothing.
type Metrics interface {
	// DeliveryFailed: one attempt failed (claimstream_sink_delivery_failures_total).
	DeliveryFailed(sink string)
	// Delivered: an event was accepted by the receiver.
	Delivered(sink string)
	// DeadLettered: an event was given up on and recorded.
	DeadLettered(sink string)
}

// DeadLetter is the record of an event a sink gave up on, one JSON message
// on the dead-letter stream. Subject is the event's CloudEvents subject
// (older records on a stream hold the log's NATS subject instead).
type DeadLetter struct {
	Sink      string    `json:"sink"`
	EventID   string    `json:"eventId"`
	Seq       uint64    `json:"seq"`
	Type      string    `json:"type"`
	Subject   string    `json:"subject"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"lastError"`
	Time      time.Time `json:"time"`
}

// DeadLetterStream is the stream of the event store's dead-letter records:
// the store's stream name + "_DEADLETTER" (CLAIMSTREAM_DEADLETTER).
func DeadLetterStream(store *eventlog.Store) string { return store.Stream() + "_DEADLETTER" }

// DeadLetterSubject is the subject of a sink's records: <prefix>dl.<sink>
// (csdl.<sink>).
func DeadLetterSubject(store *eventlog.Store, sink string) string {
	return store.Subjects().Prefix + "dl." + sink
}

// Dispatcher runs the sinks of one Config.
type Dispatcher struct {
	JS      jetstream.JetStream
	Store   *eventlog.Store
	Config  Config
	Clock   clock.Clock
	Metrics Metrics
	Logger  *slog.Logger
	// HTTPClient, when set, is the base client of every sink (its Timeout
	// is overridden by the sink's). Tests use it; serve leaves it nil.
	HTTPClient *http.Client
	// FetchWait bounds one pull request (default 5s); shorter waits only
	// make an idle sink poll more often.
	FetchWait time.Duration
}

// Run delivers until ctx ends; see Dispatcher.Run.
func Run(ctx context.Context, js jetstream.JetStream, store *eventlog.Store, cfg Config, clk clock.Clock, m Metrics) error {
	d := &Dispatcher{JS: js, Store: store, Config: cfg, Clock: clk, Metrics: m}
	return d.Run(ctx)
}

// Run creates (or updates) each sink's durable consumer and the dead-letter
// stream, then delivers until ctx ends, when it returns nil after the
// deliveries in flight have finished (an in-flight request is not cut off,
// so an event the receiver accepted is acked). A configuration the server
// refuses is an error at once. With no sinks it returns nil at once.
func (d *Dispatcher) Run(ctx context.Context) error {
	if len(d.Config.Sinks) == 0 {
		return nil
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.FetchWait <= 0 {
		d.FetchWait = 5 * time.Second
	}
	if err := d.ensureDeadLetterStream(ctx); err != nil {
		return err
	}
	workers := make([]*worker, 0, len(d.Config.Sinks))
	for _, s := range d.Config.Sinks {
		// A Config built in code gets its defaults and checks here; a
		// loaded one already has them.
		s = s.clone()
		if err := s.normalize(); err != nil {
			return fmt.Errorf("sink %s: %w", s.Name, err)
		}
		w, err := d.newWorker(ctx, s)
		if err != nil {
			return err
		}
		workers = append(workers, w)
	}
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (d *Dispatcher) ensureDeadLetterStream(ctx context.Context) error {
	name := DeadLetterStream(d.Store)
	_, err := d.JS.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        name,
		Description: "claimstream: events a webhook sink gave up on",
		Subjects:    []string{d.Store.Subjects().Prefix + "dl.>"},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		MaxAge:      400 * 24 * time.Hour,
		Duplicates:  2 * time.Minute,
		// Kept on as many servers as the log it records.
		Replicas: d.Store.Replicas(),
	})
	if err != nil {
		return fmt.Errorf("dead-letter stream %s: %w", name, err)
	}
	return nil
}

// consumerConfig is the durable consumer of s. An existing consumer keeps
// its start; its filters and description follow the file.
func (d *Dispatcher) consumerConfig(s Sink) jetstream.ConsumerConfig {
	// Any subscriber reads the description (CONSUMER.INFO), and backups
	// hold it: the URL without its credentials.
	cfg := jetstream.ConsumerConfig{
		Durable:        s.ConsumerName(),
		Description:    "claimstream webhook sink " + s.Name + " -> " + RedactURL(s.URL),
		FilterSubjects: s.FilterSubjects(d.Store.Subjects()),
		AckPolicy:      jetstream.AckExplicitPolicy,
		// One event in flight: delivery in log order.
		MaxAckPending: 1,
		// The loop retries by itself; the server never gives up on an event.
		MaxDeliver:    -1,
		AckWait:       max(30*time.Second, 2*s.Timeout),
		DeliverPolicy: jetstream.DeliverNewPolicy,
	}
	if s.Start == StartAll {
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	return cfg
}

func (d *Dispatcher) ensureConsumer(ctx context.Context, s Sink) (jetstream.Consumer, error) {
	cfg := d.consumerConfig(s)
	stream := d.Store.Stream()
	c, err := d.JS.Consumer(ctx, stream, cfg.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		c, err = d.JS.CreateConsumer(ctx, stream, cfg)
	case err == nil:
		// Resume: keep where it started, follow the file's filters (and
		// replace a description that held the URL's credentials).
		old := c.CachedInfo().Config
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = old.DeliverPolicy, old.OptStartSeq, old.OptStartTime
		c, err = d.JS.UpdateConsumer(ctx, stream, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("sink %s: consumer %s on %s: %w", s.Name, cfg.Durable, stream, err)
	}
	// An event left unacked by the previous run (it stopped or crashed
	// mid-delivery) would come back only when its AckWait passes, and
	// holds the sink until then (one in flight). This run is the sink's
	// only reader: start again right after the ack floor, at once.
	if info := c.CachedInfo(); info != nil && info.NumAckPending > 0 {
		if _, rerr := d.JS.ResetConsumer(ctx, stream, cfg.Durable); rerr != nil {
			d.Logger.Warn("sink: could not reset the consumer to its ack floor; the unacked event comes back after AckWait", "sink", s.Name, "err", rerr)
		} else if c, err = d.JS.Consumer(ctx, stream, cfg.Durable); err != nil {
			return nil, fmt.Errorf("sink %s: consumer %s on %s: %w", s.Name, cfg.Durable, stream, err)
		}
	}
	return c, nil
}

type worker struct {
	d    *Dispatcher
	sink Sink
	cons jetstream.Consumer
	ce   client.Client
	log  *slog.Logger
}

func (d *Dispatcher) newWorker(ctx context.Context, s Sink) (*worker, error) {
	cons, err := d.ensureConsumer(ctx, s)
	if err != nil {
		return nil, err
	}
	w, err := d.newSender(s)
	if err != nil {
		return nil, err
	}
	w.cons = cons
	return w, nil
}

// newSender is a worker without a consumer: what sends one event to the
// sink (its URL, mode, headers, timeout). Delivery and redelivery share it.
func (d *Dispatcher) newSender(s Sink) (*worker, error) {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	hc := http.Client{}
	if d.HTTPClient != nil {
		hc = *d.HTTPClient
	}
	hc.Timeout = s.Timeout
	opts := []cehttp.Option{cehttp.WithTarget(s.URL), cehttp.WithClient(hc)}
	for k, v := range s.Headers {
		opts = append(opts, cehttp.WithHeader(k, v))
	}
	p, err := cehttp.New(opts...)
	if err != nil {
		// The sdk's target error quotes the URL.
		return nil, fmt.Errorf("sink %s: http protocol: %w", s.Name, RedactError(err))
	}
	c, err := cloudevents.NewClient(p)
	if err != nil {
		return nil, fmt.Errorf("sink %s: cloudevents client: %w", s.Name, err)
	}
	return &worker{d: d, sink: s, ce: c, log: d.Logger.With("sink", s.Name)}, nil
}

// run is the delivery loop of one sink.
func (w *worker) run(ctx context.Context) {
	w.log.Info("sink delivering", "url", RedactURL(w.sink.URL), "consumer", w.sink.ConsumerName(), "filters", w.sink.FilterSubjects(w.d.Store.Subjects()))
	failures := 0
	for ctx.Err() == nil {
		fctx, cancel := context.WithTimeout(ctx, w.d.FetchWait)
		m, err := w.cons.Next(jetstream.FetchContext(fctx))
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrNoMessages) {
				failures = 0
				continue
			}
			failures++
			w.log.Warn("sink fetch failed", "err", err)
			if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
				if c, cerr := w.d.ensureConsumer(ctx, w.sink); cerr == nil {
					w.cons = c
				}
			}
			if !w.wait(ctx, w.backoff(failures)) {
				return
			}
			continue
		}
		failures = 0
		w.handle(ctx, m)
	}
}

// handle delivers one message and acks it when it is done with it. An
// event left unacked (ctx ended during its retries) is delivered again by
// the consumer after a restart.
func (w *worker) handle(ctx context.Context, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		w.log.Warn("sink: message without metadata", "err", err)
		_ = m.Term()
		return
	}
	e := events.FromMsg(w.d.Store.Subjects(), m.Subject(), meta.Sequence.Stream, m.Headers(), m.Data())
	if e.Data == nil {
		w.log.Warn("sink skips an event it cannot read", "seq", e.Seq, "subject", e.Subject, "err", e.Err)
		w.ack(ctx, m, e)
		return
	}
	if !w.sink.Wants(e) {
		w.ack(ctx, m, e)
		return
	}
	attempts, err := w.deliver(ctx, m, e)
	if err == nil {
		if w.d.Metrics != nil {
			w.d.Metrics.Delivered(w.sink.Name)
		}
		w.ack(ctx, m, e)
		return
	}
	if ctx.Err() != nil {
		// Not delivered: hand it back so that the next run gets it at
		// once (after a crash it comes back when AckWait has passed).
		if err := m.Nak(); err == nil {
			_ = w.d.JS.Conn().FlushTimeout(2 * time.Second)
		}
		return
	}
	w.log.Error("sink gave up on an event", "seq", e.Seq, "type", e.Type, "id", e.ID, "attempts", attempts, "err", err)
	if derr := w.deadLetter(ctx, e, attempts, err); derr != nil {
		// Leave it unacked: the consumer hands it to us again.
		w.log.Error("sink could not write the dead-letter record; retrying the event", "seq", e.Seq, "err", derr)
		w.wait(ctx, w.sink.Backoff.Max)
		_ = m.Nak()
		return
	}
	if w.d.Metrics != nil {
		w.d.Metrics.DeadLettered(w.sink.Name)
	}
	w.ack(ctx, m, e)
}

// deliver sends e until the receiver accepts it, the attempts run out (a
// dead-lettering sink), or ctx ends. It returns the attempts made.
func (w *worker) deliver(ctx context.Context, m jetstream.Msg, e events.Event) (int, error) {
	// The one shape of an event (events.Structured): the export's and the
	// API's names, with the log sequence.
	ce, err := e.Structured()
	if err != nil {
		return 0, err
	}
	for attempt := 1; ; attempt++ {
		err := w.send(ctx, ce, e)
		if err == nil {
			if attempt > 1 {
				w.log.Info("sink delivered after retries", "seq", e.Seq, "type", e.Type, "attempts", attempt)
			}
			return attempt, nil
		}
		if w.d.Metrics != nil {
			w.d.Metrics.DeliveryFailed(w.sink.Name)
		}
		w.log.Warn("sink delivery failed", "seq", e.Seq, "type", e.Type, "attempt", attempt, "err", err)
		if w.sink.DeadLetters() && attempt >= w.sink.MaxAttempts {
			return attempt, err
		}
		// Keep the server from handing the event out again while we wait.
		_ = m.InProgress()
		if !w.wait(ctx, w.backoff(attempt)) {
			return attempt, ctx.Err()
		}
		_ = m.InProgress()
	}
}

// send makes one attempt. The request is not cut off when ctx ends: a
// receiver that accepts it is acked, so it never sees the event twice. Its
// error shows the URL without credentials (net/http's *url.Error prints the
// user and the query): it is logged, dead-lettered and answered by the API.
func (w *worker) send(ctx context.Context, ce cloudevents.Event, e events.Event) error {
	return RedactError(w.sendOnce(ctx, ce, e))
}

func (w *worker) sendOnce(ctx context.Context, ce cloudevents.Event, e events.Event) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.sink.Timeout)
	defer cancel()
	if w.sink.Mode == ModeStructured {
		sctx = cloudevents.WithEncodingStructured(sctx)
	} else {
		sctx = cloudevents.WithEncodingBinary(sctx)
	}
	if e.TraceParent != "" {
		// The W3C header too, so a traced receiver continues the trace.
		sctx = cehttp.WithCustomHeader(sctx, http.Header{"Traceparent": []string{e.TraceParent}})
	}
	res := w.ce.Send(sctx, ce)
	if cloudevents.IsACK(res) {
		return nil
	}
	var hr *cehttp.Result
	if cloudevents.ResultAs(res, &hr) {
		return fmt.Errorf("%s answered %d: %w", RedactURL(w.sink.URL), hr.StatusCode, res)
	}
	if res == nil {
		return fmt.Errorf("%s: no result", RedactURL(w.sink.URL))
	}
	return res
}

// backoff is the wait after the n-th failure: Initial * 2^(n-1), at most Max.
func (w *worker) backoff(n int) time.Duration {
	d := w.sink.Backoff.Initial
	for i := 1; i < n && d < w.sink.Backoff.Max; i++ {
		d *= 2
	}
	return min(d, w.sink.Backoff.Max)
}

// wait waits d on the clock; false when ctx ended first.
func (w *worker) wait(ctx context.Context, d time.Duration) bool {
	t := w.d.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// ack acknowledges m, waiting for the server's confirmation, with a few
// tries: an ack that never lands means the event comes again after a
// restart.
func (w *worker) ack(ctx context.Context, m jetstream.Msg, e events.Event) {
	actx := context.WithoutCancel(ctx)
	var err error
	for i := 0; i < 3; i++ {
		c, cancel := context.WithTimeout(actx, 5*time.Second)
		err = m.DoubleAck(c)
		cancel()
		if err == nil {
			return
		}
	}
	w.log.Error("sink could not ack; the event will be delivered again after a restart", "seq", e.Seq, "err", err)
}

func (w *worker) deadLetter(ctx context.Context, e events.Event, attempts int, cause error) error {
	// Subject is the CloudEvents subject (the claim, else the slot, else
	// the group), as everywhere an event is shown; the error is one line.
	subject := e.Subject
	if ce, err := e.CloudEvent(); err == nil {
		subject = ce.Subject()
	}
	rec := DeadLetter{
		Sink: w.sink.Name, EventID: e.ID, Seq: e.Seq, Type: string(e.Type), Subject: subject,
		Attempts: attempts, LastError: RedactText(strings.Join(strings.Fields(cause.Error()), " ")), Time: w.d.Clock.Now().UTC(),
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(DeadLetterSubject(w.d.Store, w.sink.Name))
	msg.Data = b
	// A retried record (the ack of the first was lost) is deduplicated.
	msg.Header.Set(jetstream.MsgIDHeader, w.sink.Name+"-"+strconv.FormatUint(e.Seq, 10))
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, err = w.d.JS.PublishMsg(pctx, msg)
	return err
}

// ReadDeadLetters returns the dead-letter records of sink ("" for every
// sink), oldest first.
func ReadDeadLetters(ctx context.Context, js jetstream.JetStream, store *eventlog.Store, sink string) ([]DeadLetter, error) {
	filter := store.Subjects().Prefix + "dl.>"
	if sink != "" {
		filter = DeadLetterSubject(store, sink)
	}
	st, err := js.Stream(ctx, DeadLetterStream(store))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []DeadLetter
	for seq := uint64(1); seq <= info.State.LastSeq; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		var r DeadLetter
		if err := json.Unmarshal(raw.Data, &r); err != nil {
			return nil, fmt.Errorf("dead-letter seq %d: %w", raw.Sequence, err)
		}
		r.LastError = RedactText(r.LastError) // a record stored before it was redacted
		out = append(out, r)
		seq = raw.Sequence + 1
	}
	return out, nil
}
