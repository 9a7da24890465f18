package decide

import (
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// The lifecycle deciders: the moves the reactors make on a claim. Each is
// pure and level-based: given the views and the time, it says what the next
// event is, or nothing when the claim is not in the shape it acts on (a
// duplicate delivery or a second reactor pass decides nothing twice).

// BootClaim moves a pending claim to booting: the attempt it is buying and
// the name of its startup Job. A claim past MaxConsecutiveAttempts fails
// instead of booting a fourth time; an overdue one fails its deadline.
type BootClaim struct {
	Claim string
	Cause string
}

func (c BootClaim) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c BootClaim) ClaimName() string { return c.Claim }

func (c BootClaim) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || !cl.IsPending() || !cl.WantsMachine() {
		return nil, nil
	}
	if cl.Overdue(now) {
		return failWrite(s, cl, now, projections.ReasonDeadlineExceeded, fmt.Sprintf("deadline %s passed before the boot started", cl.DeadlineAt.Format(time.RFC3339)), false, c.Cause), nil
	}
	if cl.Attempt > projections.MaxConsecutiveAttempts {
		return failWrite(s, cl, now, projections.ReasonAttemptLimitReached, fmt.Sprintf("attempt %d would pass the bound of %d consecutive boots", cl.Attempt, projections.MaxConsecutiveAttempts), false, c.Cause), nil
	}
	attempt := max(cl.Attempt, 1)
	ref := claimRef(cl, orCause(c.Cause, "boot"))
	ref.Attempt = attempt
	return []events.Write{slotWrite(s, cl.Slot, now, events.ClaimBooting{Ref: ref, StartupJob: JobName(cl.Name, "start", attempt)})}, nil
}

// MarkReady moves a booting claim to ready: its machine passed the
// readiness gate. The deadline is cleared by the move.
type MarkReady struct {
	Claim string
	Node  string
	Cause string
}

func (c MarkReady) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c MarkReady) ClaimName() string { return c.Claim }

func (c MarkReady) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || cl.Phase != projections.PhaseBooting {
		return nil, nil
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.ClaimReady{Ref: claimRef(cl, orCause(c.Cause, "readiness gate passed")), Node: c.Node})}, nil
}

// FailClaim ends a live claim failed with a reason (StartupJobFailed,
// JobTimeout, ReadinessGateTimeout, MachineGone, HostLost, ...).
type FailClaim struct {
	Claim         string
	Reason        string
	Message       string
	ForceShutdown bool
	Cause         string
}

func (c FailClaim) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c FailClaim) ClaimName() string { return c.Claim }

func (c FailClaim) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	if c.Reason == "" {
		return nil, Refuse(CodeInvalidArgument, "reason: a failed claim needs a reason")
	}
	cl := s.Claims[c.Claim]
	if cl == nil || !cl.IsLive() {
		return nil, nil
	}
	return failWrite(s, cl, now, c.Reason, c.Message, c.ForceShutdown, c.Cause), nil
}

// ExpireDeadline fails a claim in the boot window whose deadline passed,
// and asks for its machine to be shut down: an overdue boot must not join
// and start serving. A ready claim is never touched.
type ExpireDeadline struct {
	Claim string
}

func (c ExpireDeadline) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c ExpireDeadline) ClaimName() string { return c.Claim }

func (c ExpireDeadline) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || !cl.Overdue(now) {
		return nil, nil
	}
	msg := fmt.Sprintf("deadline %s passed in phase %s", cl.DeadlineAt.Format(time.RFC3339), cl.Phase.Normal())
	return failWrite(s, cl, now, projections.ReasonDeadlineExceeded, msg, true, "boot deadline passed"), nil
}

// CompleteClaim ends a ready claim completed: its scale-down landed (the
// machine is observed off) or its machine was removed by hand.
type CompleteClaim struct {
	Claim  string
	Reason string
	Cause  string
}

func (c CompleteClaim) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c CompleteClaim) ClaimName() string { return c.Claim }

func (c CompleteClaim) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || !projections.CanMove(cl.Phase, projections.PhaseCompleted) {
		return nil, nil
	}
	reason := c.Reason
	if reason == "" {
		reason = projections.ReasonScaledDown
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.ClaimCompleted{Ref: claimRef(cl, orCause(c.Cause, "machine observed off")), Reason: reason})}, nil
}

// CollectClaim drops a terminal claim from the live views once its TTL has
// passed. Its history stays in the log; the slot keeps its digest.
type CollectClaim struct {
	Claim string
}

func (c CollectClaim) LockKey(s *projections.State) string { return claimGroup(s, c.Claim) }

// ClaimName is the claim the command is about (handlers.ClaimCommand).
func (c CollectClaim) ClaimName() string { return c.Claim }

func (c CollectClaim) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	cl := s.Claims[c.Claim]
	if cl == nil || !cl.Phase.IsTerminal() || cl.FinishedAt == nil || now.Before(cl.FinishedAt.Add(cl.TTL.D())) {
		return nil, nil
	}
	return []events.Write{slotWrite(s, cl.Slot, now, events.ClaimCollected{Ref: claimRef(cl, fmt.Sprintf("TTL %s passed", cl.TTL))})}, nil
}

func failWrite(s *projections.State, cl *projections.Claim, now time.Time, reason, msg string, force bool, cause string) []events.Write {
	return []events.Write{slotWrite(s, cl.Slot, now, events.ClaimFailed{
		Ref: claimRef(cl, orCause(cause, reason)), Reason: reason, Message: msg, ForceShutdown: force,
	})}
}

func claimGroup(s *projections.State, claim string) string {
	if cl := s.Claims[claim]; cl != nil {
		return groupOfSlot(s, cl.Slot)
	}
	return ""
}

func orCause(cause, fallback string) string {
	if cause == "" {
		return fallback
	}
	return cause
}
