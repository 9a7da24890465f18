package eventlog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A reader of the log (Read, Tail) runs on an ordered consumer of the
// stream, and a stream holds at most StoreConfig.MaxConsumers of them. So
// every reader's consumer is named after its owner, deleted when its read
// ends, and bounded in number; a consumer whose process died expires after
// readerInactive, and a restarted replica deletes its previous life's
// consumers at once (FreeStaleReaders).

// readerNamePrefix starts the name of every reader's consumer:
// csread_<replica>_<incarnation>_<read>_<serial>, where read counts this
// process's reads (two reads never share a consumer) and serial the
// consumer's re-creations within one read.
const readerNamePrefix = "csread_"

// readerInactive is how long the server keeps a reader's consumer that
// nobody pulls from: the consumer of a process that died without deleting
// it. It outlasts a long pause of a live process (a reader that finds its
// consumer gone makes a new one).
const readerInactive = 2 * time.Minute

// DefaultMaxConsumers is the stream's consumer limit when StoreConfig sets
// none: nats-server's own default, stated so that it is a choice. The
// process needs a handful per replica (the views' reader, the reads in
// flight, the sinks' durables), bounded by MaxReaders.
const DefaultMaxConsumers = 1000

// DefaultMaxReaders bounds the reads in flight on one replica (REST
// listings, exports, SSE streams, replays, index catch-ups); the views'
// own reader is never refused.
const DefaultMaxReaders = 128

// codeMaxConsumers is JetStream's refusal of a consumer over the stream's
// or the account's limit.
const codeMaxConsumers = 10026

// ErrTooManyReaders is returned by a read refused because MaxReaders reads
// are already in flight on this replica: try again once some have ended.
var ErrTooManyReaders = errors.New("too many reads of the event log in flight")

// ConsumerLimitError is a reader's consumer refused because the stream has
// reached its consumer limit, after this process freed what was its own.
type ConsumerLimitError struct {
	Stream    string
	Consumers int
	Limit     int
	// Others counts the consumers the process did not create.
	Others int
	Err    error
}

func (e *ConsumerLimitError) Error() string {
	return fmt.Sprintf("stream %s has reached its limit of %d consumers (%d exist, %d of them not claimstream's readers): "+
		"no new reader of the log can start; find them with `nats consumer ls %s` as the process's account and delete the ones nobody uses: %v",
		e.Stream, e.Limit, e.Consumers, e.Others, e.Stream, e.Err)
}

func (e *ConsumerLimitError) Unwrap() error { return e.Err }

func isMaxConsumers(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeMaxConsumers
}

// priorityRead marks a context whose reads are never refused by MaxReaders.
type priorityRead struct{}

// PriorityRead returns ctx marked so that its reads of the log do not
// count against StoreConfig.MaxReaders: the views' own reader, which the
// whole plane waits on, must start even while clients hold every read.
func PriorityRead(ctx context.Context) context.Context {
	return context.WithValue(ctx, priorityRead{}, true)
}

func isPriorityRead(ctx context.Context) bool {
	v, _ := ctx.Value(priorityRead{}).(bool)
	return v
}

// readerOwner is the consumer-name-safe form of a replica's name.
func readerOwner(name string) string {
	if name == "" {
		name = "claimstream"
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-':
			return r
		}
		return '-'
	}, name)
}

func newIncarnation() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// readerPrefix is the NamePrefix of this process's readers' consumers.
func (s *Store) readerPrefix() string {
	return readerNamePrefix + s.owner + "_" + s.incarnation
}

// acquireReader takes a place among the reads in flight, or refuses.
func (s *Store) acquireReader(ctx context.Context) (func(), error) {
	if isPriorityRead(ctx) {
		return func() {}, nil
	}
	select {
	case s.readers <- struct{}{}:
		return func() { <-s.readers }, nil
	default:
		return nil, fmt.Errorf("read %s: %w (%d on this replica)", s.cfg.Stream, ErrTooManyReaders, cap(s.readers))
	}
}

// deleteReader removes a reader's consumer once its read has ended.
func (s *Store) deleteReader(ctx context.Context, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || info.Name == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.AnswerWait)
	defer cancel()
	if err := s.js.DeleteConsumer(dctx, s.cfg.Stream, info.Name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		// It expires after readerInactive.
		s.cfg.Logger.Debug("reader's consumer not deleted; it expires when inactive", "stream", s.cfg.Stream, "consumer", info.Name, "err", err)
	}
}

// FreeStaleReaders deletes the consumers of readers this replica started
// in an earlier life (before a crash or a kill), which nobody reads any
// more: they would hold places under the stream's consumer limit until
// they expire. It returns how many it deleted.
func (s *Store) FreeStaleReaders(ctx context.Context) (int, error) {
	names, _, err := s.consumerNames(ctx)
	if err != nil {
		return 0, err
	}
	own := readerNamePrefix + s.owner + "_"
	current := s.readerPrefix() + "_"
	freed := 0
	for _, n := range names {
		if !strings.HasPrefix(n, own) || strings.HasPrefix(n, current) {
			continue
		}
		if err := s.js.DeleteConsumer(ctx, s.cfg.Stream, n); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return freed, fmt.Errorf("delete stale reader %s of %s: %w", n, s.cfg.Stream, err)
		}
		freed++
	}
	if freed > 0 {
		s.cfg.Logger.Info("deleted the consumers of this replica's readers from before its restart", "stream", s.cfg.Stream, "deleted", freed)
	}
	return freed, nil
}

// consumerNames lists the stream's consumers, and how many of them are
// not claimstream readers.
func (s *Store) consumerNames(ctx context.Context) ([]string, int, error) {
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return nil, 0, fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
	}
	lister := st.ConsumerNames(ctx)
	var names []string
	others := 0
	for n := range lister.Name() {
		names = append(names, n)
		if !strings.HasPrefix(n, readerNamePrefix) {
			others++
		}
	}
	if err := lister.Err(); err != nil {
		return nil, 0, fmt.Errorf("list consumers of %s: %w", s.cfg.Stream, err)
	}
	return names, others, nil
}

// ConsumerUsage is how many consumers the stream has, and its limit.
type ConsumerUsage struct {
	Consumers, Limit int
}

// ConsumerUsage reads the stream's consumer count and limit.
func (s *Store) ConsumerUsage(ctx context.Context) (ConsumerUsage, error) {
	info, err := s.streamInfo(ctx)
	if err != nil {
		return ConsumerUsage{}, err
	}
	limit := info.Config.MaxConsumers
	if limit <= 0 {
		limit = DefaultMaxConsumers
	}
	return ConsumerUsage{Consumers: info.State.Consumers, Limit: limit}, nil
}

// readerConsumer creates a reader's ordered consumer. At the stream's
// consumer limit it frees this replica's stale readers and asks once more;
// a limit still reached is a *ConsumerLimitError.
func (s *Store) readerConsumer(ctx context.Context, from uint64) (jetstream.Consumer, error) {
	// No subject filter: the stream holds only the log's subjects
	// (OpenStore), and a consumer filtered even on all of them makes the
	// server load every block from its start to count what matches.
	cfg := jetstream.OrderedConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       from,
		InactiveThreshold: readerInactive,
		NamePrefix:        fmt.Sprintf("%s_%d", s.readerPrefix(), s.reads.Add(1)),
	}
	cons, err := s.orderedConsumer(ctx, cfg)
	if err == nil || !isMaxConsumers(err) {
		s.limitSpellEnded(err)
		return cons, err
	}
	if s.cfg.ReaderName == "" {
		// Without a name of its own, "stale" cannot be told apart from
		// another process's.
	} else if freed, ferr := s.FreeStaleReaders(ctx); ferr == nil && freed > 0 {
		if cons, err = s.orderedConsumer(ctx, cfg); err == nil || !isMaxConsumers(err) {
			s.limitSpellEnded(err)
			return cons, err
		}
	}
	le := &ConsumerLimitError{Stream: s.cfg.Stream, Err: err}
	if u, uerr := s.ConsumerUsage(ctx); uerr == nil {
		le.Consumers, le.Limit = u.Consumers, u.Limit
	}
	if _, others, lerr := s.consumerNames(ctx); lerr == nil {
		le.Others = others
	}
	// One line per spell at the limit: the readers that retry (a start,
	// the views' tail) would repeat it at every attempt.
	if s.atLimit.CompareAndSwap(false, true) {
		s.cfg.Logger.Error("readers of the log cannot start: the stream's consumer limit is reached", "stream", s.cfg.Stream,
			"consumers", le.Consumers, "limit", le.Limit, "not_readers", le.Others)
	}
	return nil, le
}

// limitSpellEnded ends a spell at the consumer limit once a reader's
// consumer was created again.
func (s *Store) limitSpellEnded(err error) {
	if err == nil && s.atLimit.CompareAndSwap(true, false) {
		s.cfg.Logger.Info("readers of the log can start again: the stream is below its consumer limit", "stream", s.cfg.Stream)
	}
}
