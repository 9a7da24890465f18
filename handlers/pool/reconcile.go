package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Reconcile compares the config with the views and returns the writes that
// make the views match it: GroupDeclared (a new group, or a retired one
// coming back), GroupChanged (its spec differs), GroupRetired (in the views,
// not in the file); SlotDeclared, SlotChanged (spec or group differs),
// SlotRetired. A retired slot's live claim fails in the same write, before
// SlotRetired, with ClaimFailed{Reason: SlotDeleted, ForceShutdown: true}:
// its machine must be powered off.
//
// There is one Write per aggregate, expecting the aggregate's last sequence
// as s has it. Writes come in this order: groups declared or changed, slots
// retired, slots changed or declared, groups retired (a group is retired
// after its slots left it). A config equal to the views gives nil.
//
// A change the views forbid returns a *ConfigError and no writes: moving a
// slot to another group, or changing its providerID, while it has a live
// claim.
func Reconcile(cfg *Config, s *projections.State, now time.Time) ([]events.Write, error) {
	if cfg == nil {
		return nil, errors.New("pool: no config")
	}
	cause := "pool config " + cfg.Source
	var problems []Problem

	inFile := map[string]bool{}
	for _, g := range cfg.Groups {
		inFile[g.Name] = true
	}
	for i, sl := range cfg.Slots {
		if !inFile[sl.Group] {
			problems = append(problems, cfg.problem(i, "group", "group %q is not declared", sl.Group))
		}
	}

	var groupWrites, retireSlots, slotWrites, retireGroups []events.Write

	for _, g := range cfg.Groups {
		ref := events.Ref{Group: g.Name, Cause: cause}
		var d events.Data
		switch v := s.Groups[g.Name]; {
		case v == nil || v.Retired:
			d = events.GroupDeclared{Ref: ref, Spec: g.Spec}
		case !sameJSON(v.Spec, g.Spec):
			d = events.GroupChanged{Ref: ref, Spec: g.Spec}
		default:
			continue
		}
		groupWrites = append(groupWrites, write(events.GroupAggregate(g.Name), groupSeq(s, g.Name), now, d))
	}

	slotInFile := map[string]bool{}
	for i, sl := range cfg.Slots {
		slotInFile[sl.Name] = true
		ref := events.Ref{Slot: sl.Name, Group: sl.Group, Cause: cause}
		var d events.Data
		switch v := s.Slots[sl.Name]; {
		case v == nil || v.Retired:
			d = events.SlotDeclared{Ref: ref, Spec: sl.Spec}
		case v.Group != sl.Group || !sameJSON(v.Spec, sl.Spec):
			if live := s.LiveOfSlot(sl.Name); live != nil {
				if v.Group != sl.Group {
					problems = append(problems, cfg.problem(i, "group",
						"slot %s has live claim %s: scale it down before moving it (from group %s to %s)", sl.Name, live.Name, v.Group, sl.Group))
					continue
				}
				if v.ProviderID() != providerIDOf(sl) {
					problems = append(problems, cfg.problem(i, "providerID",
						"slot %s has live claim %s: scale it down before changing its providerID (from %s to %s)", sl.Name, live.Name, v.ProviderID(), providerIDOf(sl)))
					continue
				}
			}
			d = events.SlotChanged{Ref: ref, Spec: sl.Spec}
		default:
			continue
		}
		slotWrites = append(slotWrites, write(events.SlotAggregate(sl.Name), slotSeq(s, sl.Name), now, d))
	}

	for _, name := range sortedNames(s.Slots) {
		v := s.Slots[name]
		if v.Retired || slotInFile[name] {
			continue
		}
		w := events.Write{Aggregate: events.SlotAggregate(name), Expected: v.Seq}
		if live := s.LiveOfSlot(name); live != nil {
			w.Events = append(w.Events, events.Event{Time: now, Data: events.ClaimFailed{
				Ref:           events.Ref{Claim: live.Name, Slot: name, Group: live.Group, Attempt: live.Attempt, Cause: cause},
				Reason:        projections.ReasonSlotDeleted,
				Message:       fmt.Sprintf("slot %s left the pool config %s", name, cfg.Source),
				ForceShutdown: true,
			}})
		}
		w.Events = append(w.Events, events.Event{Time: now, Data: events.SlotRetired{Ref: events.Ref{Slot: name, Group: v.Group, Cause: cause}}})
		retireSlots = append(retireSlots, w)
	}

	for _, name := range sortedNames(s.Groups) {
		v := s.Groups[name]
		if v.Retired || inFile[name] {
			continue
		}
		retireGroups = append(retireGroups, write(events.GroupAggregate(name), v.Seq, now, events.GroupRetired{Ref: events.Ref{Group: name, Cause: cause}}))
	}

	if len(problems) > 0 {
		return nil, &ConfigError{Source: cfg.Source, Problems: sortProblems(problems)}
	}
	out := slices.Concat(groupWrites, retireSlots, slotWrites, retireGroups)
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func write(agg events.Aggregate, expected uint64, now time.Time, d events.Data) events.Write {
	return events.Write{Aggregate: agg, Expected: expected, Events: []events.Event{{Time: now, Data: d}}}
}

func groupSeq(s *projections.State, name string) uint64 {
	if g := s.Groups[name]; g != nil {
		return g.Seq
	}
	return 0
}

func slotSeq(s *projections.State, name string) uint64 {
	if sl := s.Slots[name]; sl != nil {
		return sl.Seq
	}
	return 0
}

func providerIDOf(sl Slot) string {
	if sl.Spec.ProviderID != "" {
		return sl.Spec.ProviderID
	}
	return DefaultProviderID(sl.Name)
}

// sameJSON compares two specs by their canonical JSON.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// problem is a Problem about field of the i-th slot, at its line in the
// file when the config came from one.
func (c *Config) problem(i int, field, format string, args ...any) Problem {
	sl := c.Slots[i]
	p := Problem{Line: sl.Line, Path: "slots[" + strconv.Itoa(i) + "]." + field, Msg: fmt.Sprintf(format, args...)}
	if c.tree != nil && sl.at != "" {
		ptr := sl.at + "/" + field
		p.Line, p.Path = c.tree.line(ptr), c.tree.path(ptr)
	}
	return p
}
