package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
)

// While a cluster moves a stream's leadership, or its stream is busy, a
// publish can briefly find nobody to answer it ("no responders", "no
// response from stream"). An append carries the ids of its
// events, so sending it again is safe: what landed is recognised, not
// stored twice. The append is retried for a short, bounded while.
const (
	noRespondersRetries = 20
	noRespondersWait    = 100 * time.Millisecond
)

func isNoResponders(err error) bool {
	return err != nil && (errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) ||
		strings.Contains(err.Error(), "no responders"))
}

// retryNoResponders sends the writes again while the server had no
// responder for them, at most noRespondersRetries times.
func (s *Store) retryNoResponders(ctx context.Context, att *attempt, res AppendResult, err error, writes []events.Write) (AppendResult, error) {
	for i := 0; i < noRespondersRetries && isNoResponders(err) && ctx.Err() == nil; i++ {
		select {
		case <-ctx.Done():
			return res, err
		case <-s.cfg.Clock.After(noRespondersWait):
		}
		res, err = s.appendWrites(ctx, att, writes...)
	}
	return res, err
}

// On a cluster a JetStream request can go unanswered for good: a stream
// leader that takes a write in and loses its quorum or its leadership
// before the write commits drops it, and a consumer create sent in the
// seconds after replicas rejoin may never be answered, though the same
// request sent a few seconds later is. So the store's requests go in
// tries of at most StoreConfig.AnswerWait while the caller's deadline
// leaves room for another try; the last try has the rest of the deadline.
// A caller without a deadline (the views' start, the reactors) gets
// noDeadlineTries tries, where one try of JetStream's own request timeout
// (5s) would fail a replica's start in the seconds after it rejoined.
const noDeadlineTries = 3

// inTries calls try with a context of at most wait, and again while it
// asks for another and ctx's deadline leaves room for one (or, without a
// deadline, up to noDeadlineTries in all).
func inTries[T any](ctx context.Context, wait time.Duration, try func(tctx context.Context, n int) (v T, again bool, err error)) (T, error) {
	for n := 1; ; n++ {
		dl, hasDeadline := ctx.Deadline()
		if hasDeadline && time.Until(dl) <= wait {
			v, _, err := try(ctx, n)
			return v, err
		}
		tctx, cancel := context.WithTimeout(ctx, wait)
		v, again, err := try(tctx, n)
		cancel()
		if !again || ctx.Err() != nil || !hasDeadline && n >= noDeadlineTries {
			return v, err
		}
	}
}

// timedOut reports whether a try failed because its own deadline passed,
// not the caller's.
func timedOut(ctx, tctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && errors.Is(tctx.Err(), context.DeadlineExceeded)
}

// resendUnanswered makes one publish of an append in tries (inTries). A
// resend is safe for the same reason as after "no responders": the ids
// and the expectation let the write land at most once, a resend that
// meets its own earlier landing is recognised (landedBefore), and one that
// meets the first try still held by the leader waits for it.
//
// A try that was sent and not answered by the stream marks att unsure: the
// append may have landed (AppendWrites then resolves it).
func resendUnanswered[A any](ctx context.Context, s *Store, att *attempt, writes []events.Write, publish func(context.Context) (A, error)) (A, error) {
	held := false
	wait := s.cfg.AnswerWait
	if att.once {
		// Far beyond any deadline: the one try has all of ctx's.
		wait = 24 * time.Hour
	}
	return inTries(ctx, wait, func(tctx context.Context, n int) (A, bool, error) {
		if err := tctx.Err(); err != nil {
			// Ended before it was sent: nothing of this try can land.
			var zero A
			return zero, false, err
		}
		ack, err := publish(tctx)
		if answerLost(err) {
			att.unsure = true
		}
		switch {
		case n > 1 && isInProcess(err):
			// The leader still holds the first try: its answer, or its
			// loss, decides; look again shortly.
			if !held {
				held = true
				s.cfg.Logger.Info("append held by the stream's leader, not yet committed; waiting for it", "to", aggregatesNamed(writes))
			}
			select {
			case <-ctx.Done():
				return ack, false, err
			case <-s.cfg.Clock.After(noRespondersWait):
			}
			return ack, true, err
		case timedOut(ctx, tctx, err):
			if h := s.cfg.Health; h != nil {
				h.unanswered()
			}
			s.cfg.Logger.Warn("append unanswered; sending it again",
				"to", aggregatesNamed(writes), "try", n, "waited", s.cfg.AnswerWait, "err", err)
			return ack, true, err
		}
		return ack, false, err
	})
}

// answerLost reports whether a sent try's error leaves its landing open:
// anything but an answer of the stream refusing it, or a request that
// reached nobody.
func answerLost(err error) bool {
	if err == nil || isNoResponders(err) {
		return false
	}
	var apiErr *jetstream.APIError
	return !errors.As(err, &apiErr) || isInProcess(err)
}

// isInProcess reports whether the stream refused a write because it still
// holds one with the same id, proposed and not yet committed.
func isInProcess(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == codeDuplicateInProcess
}

// orderedConsumer creates a reader's consumer in tries (inTries). A try
// that did get through leaves a consumer nobody reads; the server removes
// it after its inactivity threshold.
func (s *Store) orderedConsumer(ctx context.Context, cfg jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
	return whileUnavailable(ctx, s.cfg.Clock, func() (jetstream.Consumer, error) {
		return inTries(ctx, s.cfg.AnswerWait, func(tctx context.Context, n int) (jetstream.Consumer, bool, error) {
			cons, err := s.js.OrderedConsumer(tctx, s.cfg.Stream, cfg)
			if !timedOut(ctx, tctx, err) {
				return cons, false, err
			}
			s.cfg.Logger.Warn("reader's consumer unanswered; asking again", "stream", s.cfg.Stream, "try", n, "waited", s.cfg.AnswerWait, "err", err)
			return cons, true, err
		})
	})
}

// streamInfo asks for the stream's info in tries (inTries).
func (s *Store) streamInfo(ctx context.Context) (*jetstream.StreamInfo, error) {
	return whileUnavailable(ctx, s.cfg.Clock, func() (*jetstream.StreamInfo, error) {
		return inTries(ctx, s.cfg.AnswerWait, func(tctx context.Context, n int) (*jetstream.StreamInfo, bool, error) {
			st, err := s.js.Stream(tctx, s.cfg.Stream)
			if err != nil {
				return nil, timedOut(ctx, tctx, err), fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
			}
			return st.CachedInfo(), false, nil
		})
	})
}

// While JetStream elects a leader (of its meta group or of a stream: the
// claimstream leader hands the streams to another server whenever every
// replica is up, and a server resumed after a stall can start an
// election), a reader's request can be answered "JetStream system
// temporarily unavailable" (10008) or reach nobody, though the same
// request is served once the election ends. Nothing was created or read,
// so the request is made again: until the caller's deadline, or without
// one for unavailableFor, which outlasts an election (at most JetStream's
// longest election timeout, 9s).
// The pause between tries is the one an append takes after "no
// responders" (noRespondersWait).
const unavailableFor = 12 * time.Second

// unavailable reports whether a request failed only because the cluster
// could not take it at that moment.
func unavailable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == codeClusterNotAvail
	}
	return isNoResponders(err)
}

// whileUnavailable calls try again while it fails only because the
// cluster could not take the request (unavailable), while ctx lasts and,
// if ctx has no deadline, for at most unavailableFor.
func whileUnavailable[T any](ctx context.Context, clk clock.Clock, try func() (T, error)) (T, error) {
	v, err := try()
	began := clk.Now()
	_, bounded := ctx.Deadline()
	for unavailable(err) && (bounded || clk.Since(began) < unavailableFor) {
		select {
		case <-ctx.Done():
			return v, err
		case <-clk.After(noRespondersWait):
		}
		v, err = try()
	}
	return v, err
}
