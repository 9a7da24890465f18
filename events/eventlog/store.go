package eventlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
)

// ErrConflict is matched (errors.Is) by every optimistic-concurrency
// failure of an append: the aggregate moved past the expected sequence.
// The caller reloads its view and decides again.
var ErrConflict = errors.New("aggregate changed since it was read")

// ConflictError is the typed conflict. Code is the JetStream error code:
// 10071 (single server, "wrong last sequence: N") or 10164 (clustered
// stream, another write with the same expectation filter is in flight).
type ConflictError struct {
	Aggregate events.Aggregate
	Expected  uint64
	Code      int
	Message   string
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("append to %s expecting seq %d: %s (code %d)", e.Aggregate, e.Expected, e.Message, e.Code)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// JetStream error codes that mean an expectation was not met.
const (
	codeWrongLastSequence         = 10071
	codeWrongLastSequenceConstant = 10164
	// A batch carries a Nats-Msg-Id the stream has seen: the server checks
	// ids of a batch before its expectations, so a retried batch whose
	// first try landed meets this, not a conflict.
	codeBatchDuplicateMsgID = 10201
	// The stream's leader still holds a write with this Nats-Msg-Id,
	// proposed and not yet committed: a resend met its own first try.
	codeDuplicateInProcess = 10158
)

// isDuplicateBatch reports whether err is the server's refusal of a batch
// that carries an id it has stored.
func isDuplicateBatch(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeBatchDuplicateMsgID
}

// StoreConfig configures the event stream.
type StoreConfig struct {
	// Stream is the stream name (default "CLAIMSTREAM").
	Stream string
	// Prefix is the first subject token (default "cs").
	Prefix string
	// MaxAge bounds retention: events older expire (0: kept forever). serve
	// sets it from --retention; checkpoints cover what expires.
	MaxAge time.Duration
	// Replicas is 1 on a single server, 3 on a cluster.
	Replicas int
	// Duplicates is the Nats-Msg-Id window (default 2m).
	Duplicates time.Duration
	// Logger receives a warning for every entry a reader skips.
	Logger *slog.Logger
	// ReadStall bounds how long a bounded read (Read) waits while the
	// server delivers nothing yet says more is pending; then the rest of
	// the range is reported missing (default 30s).
	ReadStall time.Duration
	// AnswerWait bounds one try of the store's JetStream requests (an
	// append's publish, a reader's consumer create, the stream's info): a
	// request left unanswered is sent again after it, while the caller's
	// deadline allows (default 5s, JetStream's own request timeout).
	AnswerWait time.Duration
	// OutcomeWait bounds the resolution of an append whose answer was
	// lost: the read-back of its aggregates from the stream's leader and
	// one resend with the same ids (default 3s). It runs after the
	// caller's deadline, if that is what lost the answer.
	OutcomeWait time.Duration
	// Clock times the reads' idle checks (default the real clock).
	Clock clock.WithTicker
	// Health, when set, is checked before every append (an unwritable log
	// refuses at once) and told of every failed one.
	Health *LogHealth
	// Memory keeps the stream in memory instead of files: for a throwaway
	// log (a what-if run's), never for the record.
	Memory bool
	// ReaderName names this process's readers' consumers (the replica's
	// name; default "claimstream"), so that a restarted replica finds and
	// deletes the ones of its earlier life.
	ReaderName string
	// MaxConsumers is the stream's consumer limit (default
	// DefaultMaxConsumers).
	MaxConsumers int
	// MaxReaders bounds this process's reads in flight (default
	// DefaultMaxReaders); a read over it fails with ErrTooManyReaders,
	// except a PriorityRead.
	MaxReaders int
}

func (c StoreConfig) withDefaults() StoreConfig {
	if c.Stream == "" {
		c.Stream = "CLAIMSTREAM"
	}
	if c.Prefix == "" {
		c.Prefix = "cs"
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Duplicates == 0 {
		c.Duplicates = 2 * time.Minute
	}
	if c.MaxAge > 0 && c.Duplicates > c.MaxAge {
		// The server refuses a dedup window longer than the retention.
		c.Duplicates = c.MaxAge
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReadStall == 0 {
		c.ReadStall = 30 * time.Second
	}
	if c.AnswerWait == 0 {
		c.AnswerWait = 5 * time.Second
	}
	if c.OutcomeWait == 0 {
		c.OutcomeWait = 3 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.MaxConsumers == 0 {
		c.MaxConsumers = DefaultMaxConsumers
	}
	if c.MaxReaders == 0 {
		c.MaxReaders = DefaultMaxReaders
	}
	return c
}

// ReadStats counts what readers of this store met.
type ReadStats struct {
	Decoded     uint64 `json:"decoded"`
	UnknownType uint64 `json:"unknownType"`
	BadData     uint64 `json:"badData"`
}

// Store is the event log on one JetStream stream.
type Store struct {
	js       jetstream.JetStream
	cfg      StoreConfig
	subjects events.Subjects

	decoded, unknown, bad atomic.Uint64

	// owner and incarnation name this process's readers' consumers;
	// reads counts them; readers holds a place per read in flight.
	owner, incarnation string
	reads              atomic.Uint64
	readers            chan struct{}
	// atLimit: the last reader's consumer was refused at the stream's
	// consumer limit (its log line is written once per spell).
	atLimit atomic.Bool

	// fence is the in-process half of fenced appends (store_fence.go).
	fence fencing
}

// OpenStore creates the stream, or updates it to cfg, and returns the store.
// The stream denies delete and purge: the log is the record.
func OpenStore(ctx context.Context, js jetstream.JetStream, cfg StoreConfig) (*Store, error) {
	cfg = cfg.withDefaults()
	s := &Store{js: js, cfg: cfg, subjects: events.Subjects{Prefix: cfg.Prefix},
		owner: readerOwner(cfg.ReaderName), incarnation: newIncarnation(), readers: make(chan struct{}, cfg.MaxReaders)}
	storage := jetstream.FileStorage
	if cfg.Memory {
		storage = jetstream.MemoryStorage
	}
	_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:               cfg.Stream,
		Description:        "claimstream event log",
		Subjects:           []string{s.subjects.All()},
		Storage:            storage,
		Retention:          jetstream.LimitsPolicy,
		MaxAge:             cfg.MaxAge,
		Replicas:           cfg.Replicas,
		Duplicates:         cfg.Duplicates,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		MaxConsumers:       cfg.MaxConsumers,
	})
	if err != nil {
		return nil, fmt.Errorf("create stream %s: %w", cfg.Stream, err)
	}
	if cfg.ReaderName == "" {
		return s, nil
	}
	if _, err := s.FreeStaleReaders(ctx); err != nil {
		// Not fatal: they expire by themselves.
		cfg.Logger.Warn("could not delete this replica's readers from before its restart; they expire when inactive", "stream", cfg.Stream, "err", err)
	}
	return s, nil
}

// Subjects returns the subject scheme of the store.
func (s *Store) Subjects() events.Subjects { return s.subjects }

// Stream is the name of the stream.
func (s *Store) Stream() string { return s.cfg.Stream }

// JetStream returns the JetStream context the store uses.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// Stats returns the reader counters.
func (s *Store) Stats() ReadStats {
	return ReadStats{Decoded: s.decoded.Load(), UnknownType: s.unknown.Load(), BadData: s.bad.Load()}
}

// AppendResult is where an append landed.
type AppendResult struct {
	First, Last uint64
	// Duplicate is set when the server recognised a retried single-event
	// append by its id and stored nothing new.
	Duplicate bool
	Events    []events.Event
}

// Append writes events to one aggregate if, and only if, its last sequence
// is still expected. See AppendWrites.
func (s *Store) Append(ctx context.Context, agg events.Aggregate, expected uint64, evs ...events.Event) (AppendResult, error) {
	return s.AppendWrites(ctx, events.Write{Aggregate: agg, Expected: expected, Events: evs})
}

// AppendWrites appends the writes of one decision. Each write's first event
// carries Nats-Expected-Last-Subject-Sequence = Expected with the
// aggregate's wildcard filter, so a write lands only if nothing else was
// appended to its aggregate since the decider read it. More than one event
// goes as one atomic batch: all land or none do. A failed expectation is a
// *ConflictError (errors.Is(err, ErrConflict)); more than
// MaxEventsPerAppend events is an *AppendTooLargeError and sends nothing.
//
// An append whose answer was lost (no answer within the deadline, the log
// turned unwritable while it was under way, the connection closed) is
// resolved before it returns (resolveOutcome): success if it landed, a
// conflict if another write took its place, else an *OutcomeUnknownError
// (errors.Is(err, ErrOutcomeUnknown)). Such an append is never reported as
// a refusal.
//
// Under a fence (Fenced), the append lands only while the leadership's
// last event is the writer's LeaderElected; otherwise it is a
// *FencedError (errors.Is(err, ErrFenced)).
func (s *Store) AppendWrites(ctx context.Context, writes ...events.Write) (AppendResult, error) {
	if fence, ok := fenceOf(ctx); ok {
		return s.appendFenced(ctx, fence, writes)
	}
	return s.appendUnfenced(ctx, writes)
}

func (s *Store) appendUnfenced(ctx context.Context, writes []events.Write) (AppendResult, error) {
	att := &attempt{}
	res, err := s.appendWrites(ctx, att, writes...)
	res, err = s.retryNoResponders(ctx, att, res, err, writes)
	if err != nil && att.unsure && !errors.Is(err, ErrConflict) {
		return s.resolveOutcome(ctx, err, writes)
	}
	if again := s.expiredExpectations(ctx, err, writes); again != nil {
		if res, rerr := s.appendWrites(ctx, att, again...); !errors.Is(rerr, ErrConflict) {
			if rerr != nil && att.unsure {
				return s.resolveOutcome(ctx, rerr, again)
			}
			return res, rerr
		}
	}
	return res, err
}

// attempt is what the tries of one AppendWrites have left unsure.
type attempt struct {
	// unsure: a try was sent and got no answer from the stream (its
	// deadline passed, the log's guard ended it, the connection closed) or
	// was answered "held, not yet committed": it may have landed or may
	// still land.
	unsure bool
	// once: a single try with the whole deadline (the resend of a
	// resolution).
	once bool
}

func (s *Store) appendWrites(ctx context.Context, att *attempt, writes ...events.Write) (AppendResult, error) {
	msgs, out, err := s.appendMsgs(ctx, writes)
	if err != nil {
		return AppendResult{}, err
	}
	ctx, release, err := s.guardAppend(ctx)
	if err != nil {
		return AppendResult{}, err
	}
	defer release()
	return s.publishAppend(ctx, att, msgs, writes, out)
}

// appendMsgs checks the writes and builds their messages. An event without
// an id gets one, written back into writes, so that the same writes sent
// again carry the same ids.
// Under a fence (ctx), the first message carries it (store_fence.go).
func (s *Store) appendMsgs(ctx context.Context, writes []events.Write) ([]*nats.Msg, []events.Event, error) {
	total := 0
	for _, w := range writes {
		total += len(w.Events)
	}
	if total > MaxEventsPerAppend {
		return nil, nil, &AppendTooLargeError{Events: total, Aggregates: aggregatesNamed(writes)}
	}
	var msgs []*nats.Msg
	var out []events.Event
	seen := map[events.Aggregate]bool{}
	fence, fenced := fenceOf(ctx)
	for _, w := range writes {
		if len(w.Events) == 0 {
			continue
		}
		if w.Aggregate.Name == "" {
			return nil, nil, fmt.Errorf("append: write to %s has no aggregate name", w.Aggregate.Kind)
		}
		if seen[w.Aggregate] {
			return nil, nil, fmt.Errorf("append: two writes to %s in one append", w.Aggregate)
		}
		seen[w.Aggregate] = true
		for i, ev := range w.Events {
			if ev.Data == nil {
				return nil, nil, fmt.Errorf("append to %s: event %d has no data", w.Aggregate, i)
			}
			t := ev.Data.EventType()
			if got := events.AggregateOf(ev.Data); got != w.Aggregate {
				return nil, nil, fmt.Errorf("append %s to %s: the event belongs to %s", t, w.Aggregate, got)
			}
			subject := s.subjects.Subject(w.Aggregate, t)
			if ev.ID == "" {
				// A fresh id, written back so that a caller retrying the
				// same writes (an ack lost on the way) sends the same ids
				// and is recognised. Two independent decisions that happen
				// to say the same thing get different ids: both are real
				// requests, and the second must meet the expectation.
				ev.ID = newID()
				w.Events[i].ID = ev.ID
			}
			if ev.Time.IsZero() {
				return nil, nil, fmt.Errorf("append %s to %s: event has no time", t, w.Aggregate)
			}
			m, err := ToMsg(ev, subject)
			if err != nil {
				return nil, nil, fmt.Errorf("append %s to %s: %w", t, w.Aggregate, err)
			}
			m.Header.Set(jetstream.MsgIDHeader, ev.ID)
			switch {
			case i == 0 && fenced && len(msgs) == 0:
				// The append's first message carries the fence; its
				// aggregate's expectation was checked by appendFenced.
				m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(fence, 10))
				m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, s.subjects.Filter(events.Leadership()))
			case i == 0:
				// Only the first event of an aggregate carries the
				// expectation: in a batch, a later one on the same
				// subject would be refused.
				m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(w.Expected, 10))
				m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, s.subjects.Filter(w.Aggregate))
			}
			ev.Subject, ev.Type, ev.Aggregate = subject, t, w.Aggregate
			msgs = append(msgs, m)
			out = append(out, ev)
		}
	}
	if len(msgs) == 0 {
		return nil, nil, fmt.Errorf("append: no events")
	}
	return msgs, out, nil
}

// publishAppend sends the messages of one append (one message, or one
// atomic batch) in tries (resendUnanswered).
func (s *Store) publishAppend(ctx context.Context, att *attempt, msgs []*nats.Msg, writes []events.Write, out []events.Event) (AppendResult, error) {
	var first, last uint64
	var dup bool
	if len(msgs) == 1 {
		ack, err := resendUnanswered(ctx, s, att, writes, func(ctx context.Context) (*jetstream.PubAck, error) {
			return s.js.PublishMsg(ctx, msgs[0])
		})
		if err != nil {
			return s.landedBefore(ctx, s.appendFailed(ctx, s.appendError(err, writes)), writes, out)
		}
		first, last, dup = ack.Sequence, ack.Sequence, ack.Duplicate
	} else {
		ack, err := resendUnanswered(ctx, s, att, writes, func(ctx context.Context) (*jetstreamext.BatchAck, error) {
			return jetstreamext.PublishMsgBatch(ctx, s.js, msgs)
		})
		if err != nil {
			return s.landedBefore(ctx, s.appendFailed(ctx, s.appendError(err, writes)), writes, out)
		}
		last = ack.Sequence
		first = last - uint64(len(msgs)) + 1
	}
	for i := range out {
		out[i].Seq = first + uint64(i)
	}
	if dup {
		// A deduplicated single event: the ack names the original.
		out[0].Seq = last
	}
	return AppendResult{First: first, Last: last, Duplicate: dup, Events: out}, nil
}

// landedBefore turns a conflict into success when the conflict is our own
// earlier landing: the server checks expectations before Nats-Msg-Id, so a
// retried append whose first try landed (and whose ack was lost) meets its
// own events, possibly with later writes of others after them. The read
// back (readBack) finds the first event after each write's expectation:
// if it carries our id, the append had landed.
func (s *Store) landedBefore(ctx context.Context, err error, writes []events.Write, out []events.Event) (AppendResult, error) {
	if !errors.Is(err, ErrConflict) && !isDuplicateBatch(err) {
		return AppendResult{}, err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OutcomeWait)
	defer cancel()
	if rb := s.readBack(rctx, writes, out); rb.verdict == outcomeLanded {
		return rb.res, nil
	}
	return AppendResult{}, err
}

func (s *Store) appendError(err error, writes []events.Write) error {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == codeWrongLastSequence || apiErr.ErrorCode == codeWrongLastSequenceConstant) {
		ce := &ConflictError{Code: int(apiErr.ErrorCode), Message: apiErr.Description}
		if len(writes) == 1 {
			ce.Aggregate, ce.Expected = writes[0].Aggregate, writes[0].Expected
		}
		return ce
	}
	return fmt.Errorf("append to %s: %w", aggregatesNamed(writes), err)
}

// LastSeq is the sequence of the newest event in the log (0 when empty).
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	info, err := s.streamInfo(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.LastSeq, nil
}

// Read calls fn for every event with from <= seq <= to, in order. to == 0
// means the last event at the time of the call. Entries this reader cannot
// decode are counted, logged and passed to fn with Data nil and Err set.
//
// Read ends in bounded time even when the log cannot deliver the whole
// range (a truncated or damaged block file): every event that does arrive
// goes to fn, and the sequences that were skipped or never came are then
// returned as a *GapError (GapsOf). A sequence counts as never coming when
// the server has nothing left to deliver (the consumer's pending count is
// 0), or, failing that, when it delivers nothing for StoreConfig.ReadStall.
func (s *Store) Read(ctx context.Context, from, to uint64, fn func(events.Event) error) error {
	if to == 0 {
		last, err := s.LastSeq(ctx)
		if err != nil {
			return err
		}
		to = last
	}
	if from == 0 {
		from = 1
	}
	if from > to {
		return nil
	}
	// Decode on the consumer's goroutine, call fn on this one: a replay of
	// a long log keeps both cores busy (the decode is half the work).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []events.Event, 16)
	done := errors.New("done")
	var batch []events.Event
	send := func() error {
		if len(batch) == 0 {
			return nil
		}
		select {
		case batches <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
		batch = make([]events.Event, 0, 512)
		return nil
	}
	gaps := &gapTracker{next: from}
	stalled := false
	consumed := make(chan error, 1)
	go func() {
		err := s.consume(ctx, from, func(e events.Event, pending uint64) error {
			if e.Seq > to {
				gaps.missingTo(to)
				return done
			}
			gaps.saw(e.Seq)
			batch = append(batch, e)
			// Nothing pending: the server has no sequence left for this
			// range, so the rest of it is missing, not late. Unless the
			// consumer reads a copy that lags (a cluster's follower): then
			// the stream's leader holds the next one, and it comes.
			end := e.Seq == to || pending == 0 && !s.storedAtLeader(ctx, e.Seq+1)
			if len(batch) == 512 || end {
				if err := send(); err != nil {
					return err
				}
			}
			if end {
				gaps.missingTo(to)
				return done
			}
			return nil
		}, func(info *jetstream.ConsumerInfo, sinceLast time.Duration) error {
			// Called when no message came for a while: the range's tail
			// is missing when the server has delivered everything it had
			// and all of it reached the callback.
			if info != nil && info.NumPending == 0 && info.Delivered.Stream < gaps.expected() && !s.storedAtLeader(ctx, gaps.expected()) {
				gaps.missingTo(to)
				return done
			}
			if sinceLast >= s.cfg.ReadStall {
				stalled = true
				gaps.missingTo(to)
				return done
			}
			return nil
		})
		// consume has drained: the callback no longer runs, the batch is ours.
		if err == nil || errors.Is(err, done) {
			if serr := send(); serr != nil {
				err = serr
			}
		}
		close(batches)
		consumed <- err
	}()
	for b := range batches {
		for _, e := range b {
			if err := fn(e); err != nil {
				cancel()
				for range batches {
				}
				<-consumed
				return err
			}
		}
	}
	if err := <-consumed; err != nil && !errors.Is(err, done) {
		return err
	}
	if g := gaps.result(); len(g) > 0 {
		return &GapError{Stream: s.cfg.Stream, Gaps: g, Stalled: stalled}
	}
	return nil
}

// Tail calls fn for every event from seq from on, in order, and keeps
// waiting for new ones until ctx ends or fn returns an error. A reader that
// must know of sequences the log skips compares each event's Seq with the
// one before (the projections runner does).
func (s *Store) Tail(ctx context.Context, from uint64, fn func(events.Event) error) error {
	return s.TailWith(ctx, from, nil, fn)
}

// TailWith is Tail that calls started, when set, once the server has
// accepted the reader's consumer: from then on events flow, or the error
// that stops them is returned.
func (s *Store) TailWith(ctx context.Context, from uint64, started func(), fn func(events.Event) error) error {
	if from == 0 {
		from = 1
	}
	return s.consumeFrom(ctx, from, started, func(e events.Event, _ uint64) error { return fn(e) }, nil)
}

// readerHeartbeat is how often the server tells a reader it is still
// there while it has nothing to deliver: a reader whose consumer lived on
// a replica that died finds out after two missed heartbeats and makes a
// new one on a live replica (nats.go's ordered consumer does).
const readerHeartbeat = 2 * time.Second

// readIdleCheck is how long a bounded reader waits for the next message
// before it asks the server whether anything is left to deliver.
const readIdleCheck = 200 * time.Millisecond

// consume runs an ordered consumer from seq from and hands each decoded
// event, with the count of messages the server still has for the consumer,
// to fn until fn errs or ctx ends. The consumer's own goroutine calls fn,
// in order, one message at a time. When idle is set, it is called with the
// consumer's info (nil when the server did not answer) and the time since
// the last message (or since the start) whenever no message has come for
// readIdleCheck while fn was not running; its error ends the consumption.
func (s *Store) consume(ctx context.Context, from uint64, fn func(e events.Event, pending uint64) error, idle func(*jetstream.ConsumerInfo, time.Duration) error) error {
	return s.consumeFrom(ctx, from, nil, fn, idle)
}

func (s *Store) consumeFrom(ctx context.Context, from uint64, started func(), fn func(e events.Event, pending uint64) error, idle func(*jetstream.ConsumerInfo, time.Duration) error) error {
	release, err := s.acquireReader(ctx)
	if err != nil {
		return err
	}
	defer release()
	cons, err := s.readerConsumer(ctx, from)
	if err != nil {
		return fmt.Errorf("read %s from %d: %w", s.cfg.Stream, from, err)
	}
	defer s.deleteReader(ctx, cons)
	stopped := make(chan error, 1)
	var once sync.Once
	stop := func(err error) { once.Do(func() { stopped <- err }) }
	clk := s.cfg.Clock
	// activity: the time fn last started or ended (UnixNano), 0 while fn
	// runs; the idle check waits for a quiet consumer, not a slow reader.
	var activity atomic.Int64
	activity.Store(clk.Now().UnixNano())
	cc, err := cons.Consume(func(m jetstream.Msg) {
		activity.Store(0)
		defer activity.Store(clk.Now().UnixNano())
		meta, err := m.Metadata()
		if err != nil {
			stop(fmt.Errorf("read %s: metadata: %w", s.cfg.Stream, err))
			return
		}
		if err := fn(s.decode(m.Subject(), meta.Sequence.Stream, m.Headers(), m.Data()), meta.NumPending); err != nil {
			stop(err)
		}
	}, jetstream.PullMaxMessages(4096), jetstream.PullHeartbeat(readerHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrConsumerNotFound) {
			stop(fmt.Errorf("read %s: %w", s.cfg.Stream, err))
		}
	}))
	if err != nil {
		return fmt.Errorf("read %s from %d: %w", s.cfg.Stream, from, err)
	}
	// Drain, not Stop: fn must not be running when we return.
	defer func() {
		cc.Drain()
		<-cc.Closed()
	}()
	if started != nil {
		started()
	}
	var tick <-chan time.Time
	if idle != nil {
		t := clk.NewTicker(readIdleCheck)
		defer t.Stop()
		tick = t.C()
	}
	// A closed connection ends no consumer by itself: the read would wait
	// for ever.
	closed := clk.NewTicker(readerHeartbeat)
	defer closed.Stop()
	for {
		select {
		case err := <-stopped:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-closed.C():
			if s.js.Conn().IsClosed() {
				return fmt.Errorf("read %s: %w", s.cfg.Stream, nats.ErrConnectionClosed)
			}
		case <-tick:
			last := activity.Load()
			if last == 0 {
				continue // fn is running
			}
			quiet := clk.Since(time.Unix(0, last))
			if quiet < readIdleCheck {
				continue
			}
			ictx, icancel := context.WithTimeout(ctx, readIdleCheck*5)
			info, ierr := cons.Info(ictx)
			icancel()
			if ierr != nil {
				info = nil
			}
			// The callback may have run meanwhile; judge only a quiet one.
			if activity.Load() != last {
				continue
			}
			if err := idle(info, quiet); err != nil {
				stop(err)
			}
		}
	}
}

// storedAtLeader reports whether the stream holds seq, as its leader
// answers a message get (a direct get may be answered by a lagging copy).
// Any failure counts as not held: the caller then reports it missing.
func (s *Store) storedAtLeader(ctx context.Context, seq uint64) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := s.getFromLeader(ctx, struct {
		Seq uint64 `json:"seq"`
	}{seq}, fmt.Sprintf("seq %d", seq))
	return err == nil && m.Seq == seq
}

// Get reads the event at seq.
func (s *Store) Get(ctx context.Context, seq uint64) (events.Event, error) {
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return events.Event{}, fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
	}
	raw, err := st.GetMsg(ctx, seq)
	if err != nil {
		return events.Event{}, fmt.Errorf("get seq %d: %w", seq, err)
	}
	return s.decode(raw.Subject, raw.Sequence, raw.Header, raw.Data), nil
}

func (s *Store) decode(subject string, seq uint64, h nats.Header, data []byte) events.Event {
	e := events.FromMsg(s.subjects, subject, seq, h, data)
	switch {
	case e.Err == nil:
		s.decoded.Add(1)
	case isUnknownType(e.Err):
		s.unknown.Add(1)
		s.cfg.Logger.Warn("skipping event of unknown type", "seq", seq, "subject", subject, "err", e.Err)
	default:
		s.bad.Add(1)
		s.cfg.Logger.Warn("skipping undecodable event", "seq", seq, "subject", subject, "err", e.Err)
	}
	return e
}

func isUnknownType(err error) bool {
	var u *events.UnknownTypeError
	return errors.As(err, &u)
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
