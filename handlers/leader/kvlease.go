package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"
)

// DefaultBucket is the key-value bucket of the lease without Kubernetes.
const DefaultBucket = "claimstream-leader"

// leaseKey is the one key of the bucket.
const leaseKey = "lease"

// KVConfig configures a JetStream key-value lease.
type KVConfig struct {
	// Bucket (default DefaultBucket), kept with Replicas replicas: the
	// stream's, so the lease survives what the log survives.
	Bucket   string
	Replicas int
	// Self is this replica: its stable name and its addresses.
	Self   Holder
	Timing Timing
	// Clock measures every interval of the lease on this replica (default
	// the real, monotonic clock). A remote timestamp is never trusted.
	Clock clock.WithTicker
	Log   *slog.Logger
}

// KVLease is an Elector on one key of a JetStream key-value bucket. The
// key holds the holder's record; every write is a compare-and-set on the
// key's revision, so two replicas cannot both take or renew it.
//
//   - a holder named like this replica (itself before a restart) is taken
//     back at once;
//   - another holder's lease is taken only after its revision has stayed
//     the same for LeaseDuration, measured on this replica's clock from
//     when it first saw that revision;
//   - the holder renews every RetryPeriod; a holder that has not renewed
//     within RenewDeadline has lost the lead.
type KVLease struct {
	kv  jetstream.KeyValue
	cfg KVConfig
	*term
}

// LeaseRecord is the value of the lease key.
type LeaseRecord struct {
	Holder
	// Renewed is the holder's wall time at its last renewal: for operators
	// only; no replica decides on it.
	Renewed       time.Time `json:"renewed"`
	LeaseDuration string    `json:"leaseDuration"`
}

// OpenKVLease creates (or opens) the bucket and returns the lease.
func OpenKVLease(ctx context.Context, js jetstream.JetStream, cfg KVConfig) (*KVLease, error) {
	if cfg.Self.Replica == "" {
		return nil, errors.New("leader lease: the replica has no name")
	}
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Timing = cfg.Timing.withDefaults()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      cfg.Bucket,
		Description: "claimstream leader lease",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("leader lease bucket %s: %w", cfg.Bucket, err)
	}
	return &KVLease{kv: kv, cfg: cfg, term: &term{clock: cfg.Clock, deadline: cfg.Timing.RenewDeadline, log: cfg.Log, self: cfg.Self.Replica, timing: cfg.Timing}}, nil
}

// Identity is this replica's name.
func (l *KVLease) Identity() string { return l.cfg.Self.Replica }

// Leading reports a lease renewed within the renew deadline.
func (l *KVLease) Leading() bool { return l.valid() }

// Leader is the holder last read from the key.
func (l *KVLease) Leader() Holder { return l.current() }

// Run campaigns until ctx ends; see Elector.
func (l *KVLease) Run(ctx context.Context, lead func(context.Context)) {
	w := &kvWatch{}
	for ctx.Err() == nil {
		rev, ok := l.campaign(ctx, w)
		if !ok {
			return
		}
		lost := make(chan string, 1)
		rctx, stopRenew := context.WithCancel(ctx)
		renewing := make(chan uint64, 1)
		go func() { renewing <- l.keep(rctx, rev, lost) }()
		l.term.lead(ctx, lead, lost)
		stopRenew()
		rev = <-renewing
		if rev != 0 {
			// Stopping, or the work ended on its own: hand the lease over
			// at once instead of making the others wait it out.
			l.release(context.WithoutCancel(ctx), rev)
		}
		*w = kvWatch{}
		l.pause(ctx, l.cfg.Clock)
	}
}

// kvWatch is what a follower saw of another holder: the revision and
// when, on its own clock, it first saw it.
type kvWatch struct {
	rev   uint64
	since time.Time
}

// campaign returns once this replica holds the lease (its revision), or
// ok false when ctx ended.
func (l *KVLease) campaign(ctx context.Context, w *kvWatch) (uint64, bool) {
	t := l.cfg.Clock.NewTicker(l.cfg.Timing.RetryPeriod)
	defer t.Stop()
	for {
		if rev, ok := l.tryAcquire(ctx, w); ok {
			return rev, true
		}
		select {
		case <-ctx.Done():
			return 0, false
		case <-t.C():
		}
	}
}

// tryAcquire makes one attempt to take the lease.
func (l *KVLease) tryAcquire(ctx context.Context, w *kvWatch) (uint64, bool) {
	began := l.cfg.Clock.Now()
	e, err := l.kv.Get(ctx, leaseKey)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		rev, err := l.kv.Create(ctx, leaseKey, l.record(began))
		if err != nil {
			l.cfg.Log.Debug("leader lease: create lost", "err", err)
			return 0, false
		}
		l.renewed(began)
		l.observed(l.cfg.Self)
		return rev, true
	case err != nil:
		l.cfg.Log.Warn("leader lease unreadable", "bucket", l.cfg.Bucket, "err", err)
		return 0, false
	}
	rec := decodeLeaseRecord(e.Value())
	l.observed(rec.Holder)
	now := l.cfg.Clock.Now()
	if rec.Replica != l.cfg.Self.Replica {
		if e.Revision() != w.rev {
			w.rev, w.since = e.Revision(), now
			return 0, false
		}
		if l.cfg.Clock.Since(w.since) < l.cfg.Timing.LeaseDuration {
			return 0, false
		}
	}
	rev, err := l.kv.Update(ctx, leaseKey, l.record(began), e.Revision())
	if err != nil {
		l.cfg.Log.Debug("leader lease: take over lost", "err", err)
		return 0, false
	}
	l.renewed(began)
	l.observed(l.cfg.Self)
	return rev, true
}

// keep renews the lease every RetryPeriod until ctx ends (it returns the
// revision it holds) or the lease is lost (it says why on lost and
// returns 0).
func (l *KVLease) keep(ctx context.Context, rev uint64, lost chan<- string) uint64 {
	t := l.cfg.Clock.NewTicker(l.cfg.Timing.RetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return rev
		case <-t.C():
		}
		if l.expired() {
			lost <- fmt.Sprintf("the lease was not renewed within %s", l.cfg.Timing.RenewDeadline)
			return 0
		}
		began := l.cfg.Clock.Now()
		rctx, cancel := context.WithTimeout(ctx, l.cfg.Timing.RenewDeadline)
		next, err := l.kv.Update(rctx, leaseKey, l.record(began), rev)
		cancel()
		switch {
		case err == nil:
			rev = next
			l.renewed(began)
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			lost <- "another replica took the lease"
			return 0
		case ctx.Err() != nil:
			return rev
		default:
			l.cfg.Log.Warn("leader lease not renewed", "bucket", l.cfg.Bucket, "err", err)
		}
		if l.expired() {
			lost <- fmt.Sprintf("the lease was not renewed within %s: %v", l.cfg.Timing.RenewDeadline, err)
			return 0
		}
	}
}

// release deletes the lease if this replica still holds it, so another
// replica takes it at once.
func (l *KVLease) release(ctx context.Context, rev uint64) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.Timing.RetryPeriod)
	defer cancel()
	if err := l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(rev)); err != nil {
		l.cfg.Log.Warn("leader lease not released: the others wait it out", "bucket", l.cfg.Bucket, "err", err)
		return
	}
	l.cfg.Log.Info("leader lease released", "bucket", l.cfg.Bucket)
}

func (l *KVLease) record(now time.Time) []byte {
	b, _ := json.Marshal(LeaseRecord{Holder: l.cfg.Self, Renewed: now.UTC(), LeaseDuration: l.cfg.Timing.LeaseDuration.String()})
	return b
}

// decodeLeaseRecord reads the lease key's value, written by any replica
// (or by hand). An unreadable record is nobody's lease: the zero record,
// which still has to age like any other before it is overwritten.
func decodeLeaseRecord(b []byte) LeaseRecord {
	var rec LeaseRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Replica == "" {
		return LeaseRecord{}
	}
	return rec
}
