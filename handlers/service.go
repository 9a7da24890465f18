package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// Service carries commands out: it decides from the in-memory views,
// appends the decision with the expectations of the aggregates it read,
// and on a conflict reloads and decides again. Commands that lock the same
// key (a group) run one at a time inside the process; the expectations are
// what keeps two processes (a stale leader) from writing two live claims.
type Service struct {
	store  *eventlog.Store
	views  *projections.Runner
	clock  clock.PassiveClock
	source string
	log    *slog.Logger

	// MaxConflicts bounds the re-decisions of one command (default 50).
	MaxConflicts int
	// TraceParent, when set, returns the W3C trace context of ctx to stamp
	// on every event the command writes.
	TraceParent func(context.Context) string
	// OnAppend, when set, is told of every append (for metrics), with the
	// ctx of the command that made it (its trace; a test's marker).
	OnAppend func(ctx context.Context, took time.Duration, n int, err error)
	// Tracer, when set, traces every command ("claimstream.command <Type>")
	// and every append ("claimstream.append"), and, when TraceParent is not
	// set, stamps the W3C traceparent of the append's span on every event
	// (TraceParentOf). A command about one claim (ClaimCommand) executed
	// from a ctx with no span of its own (a reactor) is traced as a child of
	// the traceparent the claim was created with, so one trace runs from
	// the request that created a claim to its last step.
	Tracer trace.Tracer

	// Gate, when set, is consulted before every append (the write gate of
	// handlers.Leadership.Permit): it returns the leadership epoch to stamp
	// on the events, or the refusal of a replica that does not lead.
	Gate func() (epoch uint64, err error)
	// Fence, when set, is the epoch this replica leads and the seq of its
	// LeaderElected (handlers.Leadership.Fence): every append goes fenced
	// by it, so the log itself refuses the write of a deposed leader.
	Fence func() (epoch, seq uint64)
	// OnFenced is told when the log refused an append for its fence.
	OnFenced func(why string)

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	// repeats counts refused scale calls not written again (demand.go).
	repeats refusalRepeats
}

// NewService returns a command service. source is the CloudEvents source of
// what it writes ("/claimstream/provider").
func NewService(store *eventlog.Store, views *projections.Runner, clk clock.PassiveClock, source string, log *slog.Logger) *Service {
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
//
// A command that decides to write nothing and fails nothing makes no span:
// the reactors' and the built-in scaler's idle passes run every few
// seconds and would bury the traces that matter. The span starts (dated
// from the start of Execute) before the first append, or at the end for a
// refusal or an error.
func (s *Service) Execute(ctx context.Context, cmd decide.Command) (res Result, err error) {
	if s.Tracer == nil {
		return s.execute(ctx, cmd, nil)
	}
	began := time.Now()
	var span trace.Span
	var spanCtx context.Context
	open := func(ctx context.Context) context.Context {
		if span == nil {
			spanCtx, span = s.startCommandSpan(ctx, cmd, trace.WithTimestamp(began))
		}
		return spanCtx
	}
	res, err = s.execute(ctx, cmd, open)
	if span == nil && err == nil {
		return res, nil
	}
	open(ctx)
	span.SetAttributes(attribute.Int("claimstream.events", len(res.Events)), attribute.Int("claimstream.conflicts", res.Conflicts))
	if res.Last != 0 {
		span.SetAttributes(attribute.Int64("claimstream.seq", int64(res.Last)))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return res, err
}

// execute decides and appends; traced, when set, starts the command's span
// before an append and returns the ctx that carries it.
func (s *Service) execute(ctx context.Context, cmd decide.Command, traced func(context.Context) context.Context) (Result, error) {
	var key string
	s.views.Read(func(st *projections.State) { key = cmd.LockKey(st) })
	if err := s.refuseWhileUnwritable(cmd); err != nil {
		return Result{}, err
	}
	unlock := s.lock(key)
	defer unlock()

	var res Result
	if s.Gate != nil {
		// A follower says so before deciding: its answer would otherwise
		// depend on its views (a refusal, or a no-op that looks done).
		if _, err := s.Gate(); err != nil {
			return res, err
		}
	}
	for {
		var writes []events.Write
		var err error
		now := s.clock.Now().UTC()
		var refused []events.Write
		s.views.Read(func(st *projections.State) {
			if writes, err = cmd.Decide(st, now); err != nil {
				refused = s.refusalWrite(st, cmd, now, err)
			}
		})
		if len(refused) > 0 {
			s.recordRefusal(ctx, refused)
		}
		if err != nil || len(writes) == 0 {
			return res, err
		}
		if err := s.views.WritesRefused(); err != nil {
			// Views built over a gap in the log may decide wrongly (a
			// lost claim looks like a free slot): write nothing.
			return res, decide.Refuse(decide.CodeFailedPrecondition, "%v", err)
		}
		if traced != nil {
			ctx = traced(ctx)
		}
		out, err := s.append(ctx, writes)
		if errors.Is(err, eventlog.ErrConflict) {
			res.Conflicts++
			if res.Conflicts > s.MaxConflicts {
				return res, decide.Refuse(decide.CodeAborted, "gave up after %d concurrent writes to the same slots: %v", res.Conflicts, err)
			}
			// Somebody wrote first: wait until the views show it, decide again.
			if err := s.catchUp(ctx); err != nil {
				return res, err
			}
			continue
		}
		if errors.Is(err, eventlog.ErrFenced) {
			if s.OnFenced != nil {
				s.OnFenced(err.Error())
			}
			return res, decide.Refuse(decide.CodeUnavailable, "not the leader: %v; retry shortly, the new leader answers", err)
		}
		if err != nil {
			return res, unavailableIfUnwritable(err)
		}
		if err := s.views.WaitFor(ctx, out.Last); err != nil {
			return res, err
		}
		res.Events, res.Last = out.Events, out.Last
		return res, nil
	}
}

// refuseWhileUnwritable refuses, before the lock, a command that would
// write while the log is known unwritable: at once, not once another
// command's append in flight (settling its outcome) lets the lock go. A
// command that would write nothing goes on as usual.
func (s *Service) refuseWhileUnwritable(cmd decide.Command) error {
	fault := s.store.Unwritable()
	if fault == nil {
		return nil
	}
	writes := false
	now := s.clock.Now().UTC()
	s.views.Read(func(st *projections.State) {
		w, err := cmd.Decide(st, now)
		writes = err == nil && len(w) > 0
	})
	if !writes {
		return nil
	}
	return unavailableIfUnwritable(fault)
}

// append stamps and appends one decision, in its own span when traced.
func (s *Service) append(ctx context.Context, writes []events.Write) (eventlog.AppendResult, error) {
	var epoch uint64
	if s.Gate != nil {
		var err error
		if epoch, err = s.Gate(); err != nil {
			return eventlog.AppendResult{}, err
		}
	}
	var span trace.Span
	if s.Tracer != nil {
		ctx, span = s.Tracer.Start(ctx, "claimstream.append", trace.WithSpanKind(trace.SpanKindProducer))
	}
	if s.Fence != nil {
		fe, seq := s.Fence()
		if fe != epoch || seq == 0 {
			return eventlog.AppendResult{}, decide.Refuse(decide.CodeUnavailable, "not the leader: this replica's term ended while the write was decided; retry shortly")
		}
		ctx = eventlog.Fenced(ctx, seq)
	}
	s.stamp(ctx, writes, epoch)
	began := time.Now()
	out, err := s.store.AppendWrites(ctx, writes...)
	took := time.Since(began)
	if s.OnAppend != nil {
		s.OnAppend(ctx, took, len(out.Events), err)
	}
	if span != nil {
		n := 0
		for _, w := range writes {
			n += len(w.Events)
		}
		span.SetAttributes(attribute.Int("claimstream.writes", len(writes)), attribute.Int("claimstream.events", n))
		switch {
		case errors.Is(err, eventlog.ErrConflict):
			span.SetAttributes(attribute.Bool("claimstream.conflict", true))
			span.SetStatus(codes.Error, "conflict")
		case err != nil:
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		default:
			span.SetAttributes(attribute.Int64("claimstream.first_seq", int64(out.First)), attribute.Int64("claimstream.last_seq", int64(out.Last)))
		}
		span.End()
	}
	return out, err
}

// ClaimCommand is a command about one claim (the lifecycle deciders). When
// traced from a ctx with no span, its span is a child of the claim's
// traceparent.
type ClaimCommand interface {
	ClaimName() string
}

// startCommandSpan starts the span of one command. A command about one
// claim, called with no span in ctx (as a reactor calls it), continues the
// trace the claim was created in.
func (s *Service) startCommandSpan(ctx context.Context, cmd decide.Command, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	name := commandName(cmd)
	attrs := []attribute.KeyValue{attribute.String("claimstream.command", name)}
	if cc, ok := cmd.(ClaimCommand); ok {
		claim := cc.ClaimName()
		attrs = append(attrs, attribute.String("claimstream.claim", claim))
		if !trace.SpanContextFromContext(ctx).IsValid() {
			var tp string
			s.views.Read(func(st *projections.State) {
				if c := st.Claims[claim]; c != nil {
					tp = c.TraceParent
				}
			})
			if tp != "" {
				ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{events.HeaderTraceParent: tp})
			}
		}
	}
	return s.Tracer.Start(ctx, "claimstream.command "+name, append(opts, trace.WithAttributes(attrs...))...)
}

// commandName is the type name of a command without its package.
func commandName(cmd decide.Command) string {
	n := fmt.Sprintf("%T", cmd)
	if i := strings.LastIndexByte(n, '.'); i >= 0 {
		n = n[i+1:]
	}
	return n
}

// TraceParentOf is the W3C traceparent of the span in ctx ("" when there
// is none).
func TraceParentOf(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c[events.HeaderTraceParent]
}

func (s *Service) catchUp(ctx context.Context) error {
	last, err := s.store.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("reload after conflict: %w", err)
	}
	return s.views.WaitFor(ctx, last)
}

func (s *Service) stamp(ctx context.Context, writes []events.Write, epoch uint64) {
	tp := ""
	switch {
	case s.TraceParent != nil:
		tp = s.TraceParent(ctx)
	case s.Tracer != nil:
		tp = TraceParentOf(ctx)
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
			e.Epoch = epoch
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
