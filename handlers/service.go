package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Service carries commands out: it decides from the in-memory views,
// appends the decision with the expectations of the aggregates it read,
// and on a conflict reloads and decides again. Commands that lock the same
// key (a group) run one at a time inside the process; the expectations are
// what keeps two processes (a stale leader) from writing two live claims.
type Service struct {
	store  *events.Store
	views  *projections.Runner
	clock  clock.PassiveClock
	source string
	log    *slog.Logger

	// MaxConflicts bounds the re-decisions of one command (default 50).
	MaxConflicts int
	// TraceParent, when set, returns the W3C trace context of ctx to stamp
	// on every event the command writes.
	TraceParent func(context.Context) string
	// OnAppend, when set, is told of every append (for metrics).
	OnAppend func(took time.Duration, n int, err error)

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// NewService returns a command service. source is the CloudEvents source of
// what it writes ("/claimstream/provider").
func NewService(store *events.Store, views *projections.Runner, clk clock.PassiveClock, source string, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{store: store, views: views, clock: clk, source: source, log: log, MaxConflicts: 50, locks: map[string]*sync.Mutex{}}
}

// Result is what a command wrote.
type Result struct {
	Events []events.Event
	// Last is the sequence of the last event written; the views reflect it
	// when Execute returns.
	Last uint64
	// Conflicts counts the re-decisions the command needed.
	Conflicts int
}

// Claims are the names of the claims the command created.
func (r Result) Claims() []string {
	var out []string
	for _, e := range r.Events {
		if c, ok := e.Data.(events.ClaimCreated); ok {
			out = append(out, c.Claim)
		}
	}
	return out
}

// Execute decides cmd and appends its events. A refusal is a *Error and
// writes nothing. On success the views already reflect what was written.
func (s *Service) Execute(ctx context.Context, cmd Command) (Result, error) {
	var key string
	s.views.Read(func(st *projections.State) { key = cmd.LockKey(st) })
	unlock := s.lock(key)
	defer unlock()

	var res Result
	for {
		var writes []events.Write
		var err error
		now := s.clock.Now().UTC()
		s.views.Read(func(st *projections.State) { writes, err = cmd.Decide(st, now) })
		if err != nil || len(writes) == 0 {
			return res, err
		}
		s.stamp(ctx, writes)
		began := time.Now()
		out, err := s.store.AppendWrites(ctx, writes...)
		if s.OnAppend != nil {
			s.OnAppend(time.Since(began), len(out.Events), err)
		}
		if errors.Is(err, events.ErrConflict) {
			res.Conflicts++
			if res.Conflicts > s.MaxConflicts {
				return res, refuse(CodeAborted, "gave up after %d concurrent writes to the same slots: %v", res.Conflicts, err)
			}
			// Somebody wrote first: wait until the views show it, decide again.
			if err := s.catchUp(ctx); err != nil {
				return res, err
			}
			continue
		}
		if err != nil {
			return res, err
		}
		if err := s.views.WaitFor(ctx, out.Last); err != nil {
			return res, err
		}
		res.Events, res.Last = out.Events, out.Last
		return res, nil
	}
}

func (s *Service) catchUp(ctx context.Context) error {
	last, err := s.store.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("reload after conflict: %w", err)
	}
	return s.views.WaitFor(ctx, last)
}

func (s *Service) stamp(ctx context.Context, writes []events.Write) {
	tp := ""
	if s.TraceParent != nil {
		tp = s.TraceParent(ctx)
	}
	for i := range writes {
		for j := range writes[i].Events {
			e := &writes[i].Events[j]
			if e.Source == "" {
				e.Source = s.source
			}
			if e.TraceParent == "" {
				e.TraceParent = tp
			}
		}
	}
}

func (s *Service) lock(key string) func() {
	s.mu.Lock()
	m := s.locks[key]
	if m == nil {
		m = &sync.Mutex{}
		s.locks[key] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}
