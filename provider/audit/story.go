// Package audit tells the story of a slot or a claim from its events: who
// asked for a machine, when and why, how the boot went, how long each step
// took, and how it ended. It reads only events (never the views), so it tells
// the story of claims the collector has long removed from the views.
package audit

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Line is one step of a story.
type Line struct {
	Seq  uint64      `json:"seq"`
	At   time.Time   `json:"at"`
	Type events.Type `json:"type"`
	// Claim is the claim the step is about; empty for a slot's own steps.
	Claim string `json:"claim,omitempty"`
	// Text tells the step in words, with the durations since earlier steps.
	Text string `json:"text"`
	// Cause is the event's own cause, as its writer put it.
	Cause string `json:"cause,omitempty"`
}

// claimClock is what a story remembers of one claim to tell durations.
type claimClock struct {
	requested, booting, ready time.Time
	attempt                   int
	shutdowns                 int
}

// Story tells events (of one slot, or of one claim) in order, one line per
// event. It is pure: the same events always give the same lines.
func Story(evs []events.Event) []Line {
	evs = append([]events.Event(nil), evs...)
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].Seq < evs[j].Seq })
	claims := map[string]*claimClock{}
	clockOf := func(name string) *claimClock {
		c := claims[name]
		if c == nil {
			c = &claimClock{}
			claims[name] = c
		}
		return c
	}
	// live is each slot's live claims as the story has seen them: a
	// ClaimCreated on a slot with one supersedes it, as the fold does.
	live := map[string][]string{}
	out := make([]Line, 0, len(evs))
	for _, e := range evs {
		l := Line{Seq: e.Seq, At: e.Time.UTC(), Type: e.Type}
		if e.Data == nil {
			l.Text = "unreadable entry, skipped by every reader"
			if e.Err != nil {
				l.Text += ": " + e.Err.Error()
			}
			out = append(out, l)
			continue
		}
		ref := e.Data.Reference()
		l.Claim, l.Cause = ref.Claim, ref.Cause
		at := e.Time
		var c *claimClock
		if ref.Claim != "" {
			c = clockOf(ref.Claim)
		}
		l.Text = tell(e.Data, at, c)
		switch e.Data.(type) {
		case events.ClaimCreated:
			if older := live[ref.Slot]; len(older) > 0 {
				l.Text += fmt.Sprintf("; supersedes %s, still live on the slot (it ends failed Superseded)", strings.Join(older, ", "))
			}
			live[ref.Slot] = []string{ref.Claim}
		case events.ClaimFailed, events.ClaimCancelled, events.ClaimCompleted, events.ClaimSuperseded:
			live[ref.Slot] = slices.DeleteFunc(live[ref.Slot], func(n string) bool { return n == ref.Claim })
		}
		out = append(out, l)
	}
	return out
}

// tell says one event in words and advances the claim's clock.
func tell(d events.Data, at time.Time, c *claimClock) string {
	switch d := d.(type) {
	case events.GroupDeclared:
		return fmt.Sprintf("group %s declared (minSize %d, maxSize %d, scaler %s)", d.Group, d.Spec.MinSize, d.Spec.MaxSize, d.Spec.Scaler)
	case events.GroupChanged:
		return fmt.Sprintf("group %s changed (minSize %d, maxSize %d, scaler %s)", d.Group, d.Spec.MinSize, d.Spec.MaxSize, d.Spec.Scaler)
	case events.GroupRetired:
		return fmt.Sprintf("group %s retired", d.Group)
	case events.ScaleDecided:
		out := fmt.Sprintf("built-in scaler: %s (demand %d, target %d, nodes %d): %s", d.Action, d.Demand, d.Target, d.Nodes, d.Reason)
		if len(d.Slots) > 0 {
			out += " [" + strings.Join(d.Slots, ", ") + "]"
		}
		return out
	case events.SlotDeclared:
		return fmt.Sprintf("slot %s declared in group %s (providerID %s)", d.Slot, d.Group, orDefault(d.Spec.ProviderID, "homelab://"+d.Slot))
	case events.SlotChanged:
		return fmt.Sprintf("slot %s changed (group %s)", d.Slot, d.Group)
	case events.SlotRetired:
		return fmt.Sprintf("slot %s retired from the pool file", d.Slot)
	case events.SlotDecommissioned:
		return "decommissioned by " + d.By + reasonSuffix(d.Reason)
	case events.SlotRecommissioned:
		return "recommissioned by " + d.By
	case events.ClaimCreated:
		c.requested, c.attempt = d.RequestedAt, d.Attempt
		return fmt.Sprintf("requested by %s via %s for group %s; attempt %d; deadline %s (budget %s%s)",
			d.RequestedBy, call(d.Request), d.Group, d.Attempt, stamp(d.DeadlineAt), d.Budget, provision(d.MaxNodeProvisionTime))
	case events.ClaimBooting:
		c.booting, c.attempt = at, d.Attempt
		return fmt.Sprintf("booting: attempt %d, startup Job %s%s", d.Attempt, d.StartupJob, since(" after ", c.requested, at, " pending"))
	case events.ClaimReady:
		c.ready = at
		s := "Ready"
		if !c.requested.IsZero() {
			s += " after " + dur(at.Sub(c.requested))
		}
		if d.Node != "" {
			s += " as node " + d.Node
		}
		return s + since(" (", c.booting, at, " booting)")
	case events.ClaimFailed:
		s := "failed " + d.Reason
		if d.Message != "" {
			s += ": " + d.Message
		}
		s += since(" after ", c.requested, at, " from the request")
		if c.attempt > 0 {
			s += fmt.Sprintf(" (attempt %d)", c.attempt)
		}
		if d.ForceShutdown {
			s += "; forced shutdown ordered"
		}
		return s
	case events.ClaimCancelled:
		s := "cancelled " + d.Reason
		if d.RequestedBy != "" {
			s += " by " + d.RequestedBy
		}
		if d.Request != nil {
			s += " via " + call(*d.Request)
		}
		return s + since(" after ", c.requested, at, " pending")
	case events.ClaimCompleted:
		s := "completed " + d.Reason
		if !c.ready.IsZero() {
			s += "; up " + dur(at.Sub(c.ready)) + " since Ready"
		}
		return s
	case events.ClaimSuperseded:
		return "superseded by " + d.By + " (a second live claim on the slot)"
	case events.ScaleDownRequested:
		s := fmt.Sprintf("scale-down by %s via %s at %s", d.RequestedBy, call(d.Request), stamp(at))
		s += reasonSuffix(d.Reason)
		return s + since("; ", c.ready, at, " after Ready")
	case events.ShutdownFired:
		if c == nil {
			return fmt.Sprintf("shutdown Job %s for a machine no claim wants%s", d.Job, forced(d.Force))
		}
		c.shutdowns = d.ShutdownAttempt
		return fmt.Sprintf("shutdown %d of %d: Job %s%s", d.ShutdownAttempt, projections.ShutdownAttemptLimit, d.Job, forced(d.Force))
	case events.ShutdownAttemptLimitReached:
		return fmt.Sprintf("%d shutdown Jobs did not power the machine off; paused until %s", d.Attempts, stamp(d.PausedUntil))
	case events.MachineObservedOff:
		return "machine observed off; the machine-gone clock starts"
	case events.MachineObservedOn:
		return "machine back on; the machine-gone clock stops"
	case events.ClaimCollected:
		return "collected from the live views (TTL passed); its history stays in the log"
	case events.NodeObserved:
		return "node " + nodeWords(d.Node)
	case events.HostJoined:
		return fmt.Sprintf("host %s joined (matched by %s)", d.Node, d.MatchedBy)
	case events.HostJoinRefused:
		return fmt.Sprintf("host %s refused: %s (cordoned and tainted)", d.Node, d.Why)
	case events.HostExpected:
		out := fmt.Sprintf("expects host %s (providerID %s", d.Node, d.ProviderID)
		if d.InstanceID != "" {
			out += ", instance " + d.InstanceID
		}
		if d.Address != "" {
			out += ", address " + d.Address
		}
		return out + ") by " + stamp(d.DeadlineAt)
	case events.DrainStarted:
		return fmt.Sprintf("drain of %s started: %d pods to move through the eviction API, timeout %s, then %s", d.Node, len(d.Pods), d.Timeout, d.Policy)
	case events.DrainTimedOut:
		return fmt.Sprintf("drain of %s timed out with %d pods left (%s); policy %s", d.Node, len(d.Remaining), strings.Join(d.Remaining, ", "), d.Policy)
	case events.UnclaimedShutdownPaused:
		return fmt.Sprintf("%d shutdown Jobs did not power off a machine no claim wants; paused until %s", d.Attempts, stamp(d.PausedUntil))
	case events.NodeDeleteRequested:
		return fmt.Sprintf("node %s deleted: %s", d.Node, d.Why)
	case events.JobObserved:
		if d.Outcome != events.JobFailed {
			break
		}
		s := fmt.Sprintf("%s Job %s failed", d.Operation, d.Job)
		if d.Reason != "" {
			s += " (" + d.Reason + ")"
		}
		if d.Message != "" {
			s += ": " + d.Message
		}
		return s
	case events.FailedInstanceDeleted:
		return fmt.Sprintf("failed instance deleted by %s via %s at %s; no longer listed", d.RequestedBy, call(d.Request), stamp(at))
	}
	return string(d.EventType())
}

// call is the request in the words of the API: IncreaseSize(+2),
// DeleteNodes(node-1,node-2), Manual.
func call(r events.Request) string {
	switch {
	case r.Delta > 0:
		return fmt.Sprintf("%s(+%d)", r.Call, r.Delta)
	case r.Delta < 0:
		return fmt.Sprintf("%s(%d)", r.Call, r.Delta)
	case len(r.Nodes) > 0:
		return r.Call + "(" + strings.Join(r.Nodes, ",") + ")"
	}
	return orDefault(r.Call, "an unnamed call")
}

func nodeWords(n events.NodeState) string {
	name := orDefault(n.Name, "(unnamed)")
	if !n.Present {
		return name + " absent"
	}
	var parts []string
	if n.Ready {
		parts = append(parts, "Ready")
	} else {
		parts = append(parts, "NotReady")
	}
	if n.Unschedulable {
		parts = append(parts, "cordoned")
	}
	if n.ToBeDeleted {
		parts = append(parts, "ToBeDeleted by cluster-autoscaler")
	}
	for _, t := range n.Taints {
		parts = append(parts, "taint "+t.String())
	}
	return name + " present, " + strings.Join(parts, ", ")
}

func since(prefix string, from, at time.Time, suffix string) string {
	if from.IsZero() {
		return ""
	}
	return prefix + dur(at.Sub(from)) + suffix
}

// dur rounds a duration to the second for reading.
func dur(d time.Duration) string { return d.Round(time.Second).String() }

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func provision(d events.Duration) string {
	if d == 0 {
		return ""
	}
	return ", maxNodeProvisionTime " + d.String()
}

func forced(f bool) string {
	if f {
		return " (forced)"
	}
	return ""
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return ": " + r
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// OfClaim keeps the events that name claim.
func OfClaim(evs []events.Event, claim string) []events.Event {
	var out []events.Event
	for _, e := range evs {
		if e.Data != nil && e.Data.Reference().Claim == claim {
			out = append(out, e)
		}
	}
	return out
}

// Claims lists the claims the events name, in the order they first appear.
func Claims(evs []events.Event) []string {
	var out []string
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Data == nil {
			continue
		}
		if c := e.Data.Reference().Claim; c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return out
}

// Render writes lines as text, one per line: the time, the claim (or "-"
// for the slot's own steps), the story, and the cause in brackets.
func Render(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		who := l.Claim
		if who == "" {
			who = "-"
		}
		fmt.Fprintf(&b, "%s  #%-6d %-24s %s", stamp(l.At), l.Seq, who, l.Text)
		if l.Cause != "" {
			fmt.Fprintf(&b, "  [cause: %s]", l.Cause)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
