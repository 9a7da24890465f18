package rest

import (
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/audit"
)

// The objects of the API. Each view object is the projection's own view
// (every field of it) with what the views derive from it added, so the API
// tells everything the views know.

// Group is a node group with its derived numbers.
type Group struct {
	projections.Group
	// TargetSize counts the live claims that want a machine.
	TargetSize int `json:"targetSize"`
	// Live counts every live claim (marked for scale-down included).
	Live int `json:"live"`
	// EffectiveMaxSize is the declared maxSize capped by the slots in service.
	EffectiveMaxSize int `json:"effectiveMaxSize"`
	// Free counts the slots IncreaseSize may claim now.
	Free int `json:"free"`
	// SlotPhases counts the group's slots by derived phase.
	SlotPhases map[projections.SlotPhase]int `json:"slotPhases"`
}

// Slot is a slot with its derived phase and live claim.
type Slot struct {
	projections.Slot
	// Phase is the derived, reported phase (docs/design.md).
	Phase projections.SlotPhase `json:"phase"`
	// LiveClaim is the slot's live claim, if any.
	LiveClaim string `json:"liveClaim,omitempty"`
	// NextAttempt is the attempt number the next claim on the slot gets.
	NextAttempt int `json:"nextAttempt"`
	// ProviderID is the declared providerID or homelab://<slot>.
	ProviderID string `json:"providerID"`
}

// Claim is a claim with its whole timeline.
type Claim struct {
	projections.Claim
	// Overdue: in the boot window and past its deadline.
	Overdue bool `json:"overdue"`
}

// List is a list of objects and the sequence of the views they come from.
type List[T any] struct {
	Seq   uint64 `json:"seq"`
	Items []T    `json:"items"`
}

// Replay is the views as they were at a past point of the log.
type Replay struct {
	// Seq is the last event folded; At the time the views are shown at.
	Seq    uint64  `json:"seq"`
	At     string  `json:"at"`
	Groups []Group `json:"groups"`
	Slots  []Slot  `json:"slots"`
	Claims []Claim `json:"claims"`
}

// Event is one entry of the log as the API shows it: the structured
// CloudEvent events.MarshalStructured writes (the same names as the export
// and the webhook sinks), decoded. The fields after Error are derived on
// decoding for the CLI and are not on the wire.
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id,omitempty"`
	Source          string          `json:"source,omitempty"`
	CEType          string          `json:"type,omitempty"`
	Subject         string          `json:"subject,omitempty"`
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	DataSchema      string          `json:"dataschema,omitempty"`
	Sequence        string          `json:"sequence"`
	Group           string          `json:"group,omitempty"`
	Slot            string          `json:"slot,omitempty"`
	Claim           string          `json:"claim,omitempty"`
	TraceParent     string          `json:"traceparent,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	// Error says why the entry could not be read (its Data is then empty).
	Error string `json:"error,omitempty"`

	// Seq is Sequence as a number, Type the catalog type of CEType,
	// Attempt and Cause the data's.
	Seq     uint64      `json:"-"`
	Type    events.Type `json:"-"`
	Attempt int         `json:"-"`
	Cause   string      `json:"-"`
}

// UnmarshalJSON decodes the structured event and derives Seq, Type,
// Attempt and Cause.
func (e *Event) UnmarshalJSON(b []byte) error {
	type wire Event
	var w wire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Event(w)
	if e.Sequence != "" {
		n, err := events.ParseSequence(e.Sequence)
		if err != nil {
			return err
		}
		e.Seq = n
	}
	if t, ok := events.TypeOfCEType(e.CEType); ok {
		e.Type = t
		if len(e.Data) > 0 {
			if d, err := events.DecodeData(t, e.Data); err == nil {
				r := d.Reference()
				e.Attempt, e.Cause = r.Attempt, r.Cause
			}
		}
	}
	return nil
}

// Audit is the story of a slot or of one claim.
type Audit struct {
	Slot  string `json:"slot"`
	Group string `json:"group,omitempty"`
	// Claim is set when the audit is of one claim.
	Claim string `json:"claim,omitempty"`
	// Claims are the claims the story tells, oldest first.
	Claims []string     `json:"claims"`
	Lines  []audit.Line `json:"lines"`
}

// CommandRequest is the body of every command: who asks, and why.
type CommandRequest struct {
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// CommandResult is what a command wrote; no events means it had nothing to do.
type CommandResult struct {
	Seq    uint64   `json:"seq"`
	Claims []string `json:"claims,omitempty"`
	Events []Event  `json:"events"`
}

// ErrorBody is every error the API answers.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
	// Seq is the last event the views reflect, Last the log's last.
	Seq  uint64 `json:"seq"`
	Last uint64 `json:"last,omitempty"`
	Lag  uint64 `json:"lag,omitempty"`
	// Problem says what is wrong with the views (sequences missing from
	// the log), ready or not.
	Problem string `json:"problem,omitempty"`
	// Reason says why the server is not ready (the log cannot be written).
	Reason string `json:"reason,omitempty"`
	// PoolFile is the last pool file read when it was not applied: the
	// server stays ready and serves the pool the log holds.
	PoolFile *pool.FileState `json:"poolFile,omitempty"`
	// History says why the cost or timeline index holds history in
	// memory that belongs on disk (a full disk): the server stays ready.
	History string `json:"history,omitempty"`
}

// --- building the objects from the views ------------------------------------

func groupOf(s *projections.State, g *projections.Group, now time.Time) Group {
	out := Group{Group: *g, SlotPhases: map[projections.SlotPhase]int{}}
	out.Slots = slices.Clone(g.Slots)
	out.TargetSize = s.TargetSize(g.Name)
	out.Live = len(s.LiveClaims(g.Name))
	out.EffectiveMaxSize = s.MaxSize(g.Name)
	out.Free = len(s.FreeSlots(g.Name, now))
	for _, slot := range g.Slots {
		out.SlotPhases[s.SlotPhase(slot)]++
	}
	return out
}

func slotOf(s *projections.State, sl *projections.Slot, now time.Time) Slot {
	out := Slot{Slot: *sl, Phase: s.SlotPhase(sl.Name), NextAttempt: s.NextAttempt(sl.Name, now), ProviderID: sl.ProviderID()}
	out.Claims = slices.Clone(sl.Claims)
	if c := s.LiveOfSlot(sl.Name); c != nil {
		out.LiveClaim = c.Name
	}
	return out
}

func claimOf(c *projections.Claim, now time.Time) Claim {
	out := Claim{Claim: *c, Overdue: c.Overdue(now)}
	out.Timeline = slices.Clone(c.Timeline)
	return out
}

func groupsOf(s *projections.State, now time.Time, all bool) []Group {
	out := []Group{}
	for _, name := range sortedKeys(s.Groups) {
		if g := s.Groups[name]; all || !g.Retired {
			out = append(out, groupOf(s, g, now))
		}
	}
	return out
}

func slotsOf(s *projections.State, now time.Time, all bool, group string) []Slot {
	out := []Slot{}
	for _, name := range sortedKeys(s.Slots) {
		sl := s.Slots[name]
		if (!all && sl.Retired) || (group != "" && sl.Group != group) {
			continue
		}
		out = append(out, slotOf(s, sl, now))
	}
	return out
}

func claimsOf(s *projections.State, now time.Time, group, slot string, phase projections.Phase) []Claim {
	out := []Claim{}
	for _, name := range sortedKeys(s.Claims) {
		c := s.Claims[name]
		if (group != "" && c.Group != group) || (slot != "" && c.Slot != slot) || (phase != "" && c.Phase.Normal() != phase) {
			continue
		}
		out = append(out, claimOf(c, now))
	}
	// Oldest request first, then name: the order an operator reads.
	sort.SliceStable(out, func(i, j int) bool { return out[i].RequestedAt.Before(out[j].RequestedAt) })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// EventOf is the API object of a log entry: events.MarshalStructured
// decoded, so the API never names a field another way.
func EventOf(e events.Event) Event {
	var out Event
	b, err := events.MarshalStructured(e)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		out = Event{SpecVersion: events.SpecVersion, ID: e.ID, Time: e.Time, Sequence: events.FormatSequence(e.Seq), Seq: e.Seq, Type: e.Type, Error: err.Error()}
	}
	return out
}

func seqString(n uint64) string { return strconv.FormatUint(n, 10) }
