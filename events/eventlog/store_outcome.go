package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
)

// ErrOutcomeUnknown is matched (errors.Is) by an append whose answer was
// lost and whose landing could not be established: it may have landed, or
// may still land. It is not a refusal: the caller must not report that
// nothing happened, and must read the aggregate before deciding again.
var ErrOutcomeUnknown = errors.New("append outcome unknown")

// OutcomeUnknownError is the unresolved append: what lost its answer and
// why the read-back could not settle it.
type OutcomeUnknownError struct {
	Aggregates string
	// Lost is the error that ended the append's tries.
	Lost error
	// Why the resolution could not decide.
	Why string
}

func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("append to %s: outcome unknown, the write may have landed or may still land: its answer was lost (%v) and %s; read the state again before asking once more",
		e.Aggregates, e.Lost, e.Why)
}

// Is makes errors.Is(err, ErrOutcomeUnknown) true. The error does not
// unwrap to what lost the answer: a lost answer is not the refusal (log
// unwritable, deadline) that ended the wait for it.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// outcome is what a read-back found of an append.
type outcome int

const (
	outcomeUnreadable outcome = iota // the stream's leader did not answer
	outcomeLanded                    // every write's first event follows its expectation
	outcomeTaken                     // another write follows an expectation: ours can never land
	outcomeAbsent                    // nothing follows the expectations yet
	outcomeMixed                     // writes disagree (not possible for one atomic append)
)

type readBackResult struct {
	verdict outcome
	res     AppendResult // when landed
	why     string       // when not landed or absent
	// taken is the write whose aggregate another write took.
	taken events.Write
}

// readBack asks the stream's leader, for each write, for the first event
// of its aggregate after its expectation. A write lands only while its
// aggregate's last sequence is the expected one, so if it landed that
// event is its own first one (by Nats-Msg-Id), whatever came after; if
// another event is there, the write can never land. out are the events as
// sent (ids set); their sequences are filled in when they landed.
func (s *Store) readBack(ctx context.Context, writes []events.Write, out []events.Event) readBackResult {
	counts := map[outcome]int{}
	res := AppendResult{Duplicate: true}
	var r readBackResult
	i := 0
	n := 0
	for _, w := range writes {
		if len(w.Events) == 0 {
			continue
		}
		n++
		first := i
		i += len(w.Events)
		ev, err := s.firstAfterFromLeader(ctx, w.Aggregate, w.Expected)
		switch {
		case errors.Is(err, ErrNoEvent):
			counts[outcomeAbsent]++
			r.why = fmt.Sprintf("%s has no event after seq %d", w.Aggregate, w.Expected)
		case err != nil:
			counts[outcomeUnreadable]++
			r.why = err.Error()
		case ev.ID == w.Events[0].ID:
			counts[outcomeLanded]++
			// Events of one write are contiguous in the log.
			for k := range w.Events {
				out[first+k].Seq = ev.Seq + uint64(k)
			}
			if res.First == 0 || ev.Seq < res.First {
				res.First = ev.Seq
			}
			res.Last = max(res.Last, ev.Seq+uint64(len(w.Events)-1))
		default:
			counts[outcomeTaken]++
			r.taken = w
			r.why = fmt.Sprintf("%s moved past seq %d by another write (seq %d, %s)", w.Aggregate, w.Expected, ev.Seq, ev.Type)
		}
	}
	switch {
	case counts[outcomeUnreadable] > 0:
		r.verdict = outcomeUnreadable
	case counts[outcomeLanded] == n:
		res.Events = out
		r.verdict, r.res = outcomeLanded, res
	case counts[outcomeLanded] > 0:
		r.verdict = outcomeMixed
		r.why = fmt.Sprintf("%d of %d writes are in the log", counts[outcomeLanded], n)
	case counts[outcomeTaken] > 0:
		r.verdict = outcomeTaken
	default:
		r.verdict = outcomeAbsent
	}
	return r
}

// resolveOutcome settles an append whose answer was lost (lost is the error
// that ended its tries), within StoreConfig.OutcomeWait of now, whatever is
// left of the caller's deadline: read back from the stream's leader; if
// nothing follows the expectations yet, send the same messages once more
// (same ids, same expectations: they land at most once) and take its
// answer. Landed is success; another write in its place is a conflict (the
// caller decides again); a resend the stream refuses outright is that
// refusal; anything else is an *OutcomeUnknownError.
func (s *Store) resolveOutcome(ctx context.Context, lost error, writes []events.Write) (AppendResult, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.OutcomeWait)
	defer cancel()
	to := aggregatesNamed(writes)
	unknown := func(why string) (AppendResult, error) {
		err := &OutcomeUnknownError{Aggregates: to, Lost: lost, Why: why}
		s.cfg.Logger.Warn("append outcome unknown: its answer was lost and the read-back did not settle it", "to", to, "lost", lost, "why", why)
		return AppendResult{}, err
	}
	msgs, out, err := s.appendMsgs(ctx, writes)
	if err != nil {
		return unknown("its messages could not be built again: " + err.Error())
	}
	rb := s.readBack(rctx, writes, out)
	switch rb.verdict {
	case outcomeLanded:
		s.cfg.Logger.Info("append answer lost; the read-back from the stream leader finds it landed", "to", to, "first", rb.res.First, "last", rb.res.Last, "lost", lost)
		return rb.res, nil
	case outcomeTaken:
		s.cfg.Logger.Info("append answer lost; the read-back finds another write in its place, so it cannot land", "to", to, "why", rb.why)
		return AppendResult{}, &ConflictError{Aggregate: rb.taken.Aggregate, Expected: rb.taken.Expected, Message: rb.why + " while this append's answer was lost"}
	case outcomeAbsent:
	default:
		return unknown("the read-back from the stream leader failed: " + rb.why)
	}
	// One resend, not guarded: a refusal of the guard would say nothing of
	// the first send, and a stream that answers settles it.
	res, err := s.publishAppend(rctx, &attempt{once: true}, msgs, writes, out)
	switch {
	case err == nil:
		s.cfg.Logger.Info("append answer lost; sent again with the same ids, it is in the log", "to", to, "first", res.First, "last", res.Last, "duplicate", res.Duplicate, "lost", lost)
		return res, nil
	case errors.Is(err, ErrConflict):
		// landedBefore found no event of ours after the expectation.
		return AppendResult{}, err
	case refusedOutright(err):
		// The stream's leader answered the resend: it holds no try of
		// ours (that would be "in process") and stores none (the
		// expectation would have failed on it), so nothing landed.
		s.cfg.Logger.Info("append answer lost; the stream refused it when sent again, so it did not land", "to", to, "lost", lost, "err", err)
		if errors.Is(lost, ErrLogUnwritable) {
			return AppendResult{}, fmt.Errorf("%w; sent again with the same ids, the stream refused it: %v", lost, err)
		}
		return AppendResult{}, fmt.Errorf("append to %s: refused when sent again after its answer was lost (%v): %w", to, lost, err)
	}
	return unknown(fmt.Sprintf("nothing follows the expected sequences yet and a resend with the same ids got no answer that settles it (%v)", err))
}

// firstAfterFromLeader reads the first event of agg after seq through the
// stream's leader ($JS.API.STREAM.MSG.GET, never a direct get: a lagging
// replica could miss the write): ErrNoEvent when there is none.
func (s *Store) firstAfterFromLeader(ctx context.Context, agg events.Aggregate, seq uint64) (events.Event, error) {
	m, err := s.getFromLeader(ctx, struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
	}{seq + 1, s.subjects.Filter(agg)}, fmt.Sprintf("the event of %s after seq %d", agg, seq))
	if err != nil {
		return events.Event{}, err
	}
	// The id alone decides; an event this build cannot decode still names it.
	id := m.Header.Get(jetstream.MsgIDHeader)
	if id == "" {
		id = m.Header.Get(events.HeaderID)
	}
	return events.Event{ID: id, Seq: m.Seq, Subject: m.Subject, Type: typeOfSubject(m.Subject)}, nil
}

// typeOfSubject is the last token of an event's subject: its type.
func typeOfSubject(subject string) events.Type {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return events.Type(subject[i+1:])
	}
	return events.Type(subject)
}

// refusedOutright reports whether err is the stream's own answer refusing
// a write, other than "held, not yet committed".
func refusedOutright(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && !isInProcess(err)
}
