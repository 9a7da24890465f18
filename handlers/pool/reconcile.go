package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
// claim; lowering a group's maxSize below its live claims (see
// ReconcileGroup).
//
// Reconcile is the whole file as one decision: it checks a file and counts
// its work. Apply writes it one group at a time (ReconcileGroup), because
// one append holds at most eventlog.MaxEventsPerAppend events.
func Reconcile(cfg *Config, s *projections.State, now time.Time) ([]events.Write, error) {
	d, err := reconcile(cfg, s, now, "")
	if err != nil {
		return nil, err
	}
	out := slices.Concat(d.groupWrites, d.retireSlots, d.slotWrites, d.retireGroups)
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// ReconcileGroup is Reconcile for one group: the writes of the group and of
// the slots the file or the views put in it, in the order that keeps every
// prefix of them safe to land alone: its slots that left the file retired
// (their live claims failed), then the group declared or changed, then its
// slots declared or changed (a slot never lands before its group), then,
// for a group that left the file, the group retired (after all its slots).
//
// The maxSize rule lives here: a change that lowers a group's maxSize below
// its live claims in service (the count IncreaseSize holds under maxSize,
// less the claims this decision fails) is refused with a *ConfigError
// naming the group, its live claims and the new maxSize; nothing is
// written. The operator scales the group down first. Run under the group's
// lock (Apply does), no IncreaseSize can land between the check and the
// write.
func ReconcileGroup(cfg *Config, s *projections.State, group string, now time.Time) ([]events.Write, error) {
	if group == "" {
		return nil, errors.New("pool: no group named")
	}
	d, err := reconcile(cfg, s, now, group)
	if err != nil {
		return nil, err
	}
	out := slices.Concat(d.retireSlots, d.groupWrites, d.slotWrites, d.retireGroups)
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// decision is what reconcile found, by kind.
type decision struct {
	groupWrites, retireSlots, slotWrites, retireGroups []events.Write
	// groups with something to write, in the order Apply writes them:
	// the file's groups in file order, then the groups leaving it.
	groups []string
	// eventsOf counts the events of each of groups.
	eventsOf map[string]int
}

func (d *decision) add(group string, list *[]events.Write, w events.Write) {
	*list = append(*list, w)
	if _, ok := d.eventsOf[group]; !ok {
		d.groups = append(d.groups, group)
	}
	d.eventsOf[group] += len(w.Events)
}

// reconcile computes the writes of every group (only == "") or of one.
func reconcile(cfg *Config, s *projections.State, now time.Time, only string) (*decision, error) {
	if cfg == nil {
		return nil, errors.New("pool: no config")
	}
	mine := func(group string) bool { return only == "" || group == only }
	cause := "pool config " + cfg.Source
	var problems []Problem
	d := &decision{eventsOf: map[string]int{}}

	inFile := map[string]bool{}
	for _, g := range cfg.Groups {
		inFile[g.Name] = true
	}
	slotInFile := make(map[string]bool, len(cfg.Slots))
	for i, sl := range cfg.Slots {
		slotInFile[sl.Name] = true
		if !inFile[sl.Group] {
			problems = append(problems, cfg.problem(i, "group", "group %q is not declared", sl.Group))
		}
	}

	for i, g := range cfg.Groups {
		if !mine(g.Name) {
			continue
		}
		ref := events.Ref{Group: g.Name, Cause: cause}
		var data events.Data
		switch v := s.Groups[g.Name]; {
		case v == nil || v.Retired:
			data = events.GroupDeclared{Ref: ref, Spec: g.Spec}
		case !sameJSON(v.Spec, g.Spec):
			if p, ok := maxSizeProblem(cfg, i, s, v, slotInFile); !ok {
				problems = append(problems, p)
				continue
			}
			data = events.GroupChanged{Ref: ref, Spec: g.Spec}
		default:
			continue
		}
		d.add(g.Name, &d.groupWrites, write(events.GroupAggregate(g.Name), groupSeq(s, g.Name), now, data))
	}

	for _, name := range d.slotsToRetire(s, only, slotInFile) {
		v := s.Slots[name]
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
		d.add(v.Group, &d.retireSlots, w)
	}

	for i, sl := range cfg.Slots {
		if !mine(sl.Group) {
			continue
		}
		ref := events.Ref{Slot: sl.Name, Group: sl.Group, Cause: cause}
		var data events.Data
		switch v := s.Slots[sl.Name]; {
		case v == nil || v.Retired:
			data = events.SlotDeclared{Ref: ref, Spec: sl.Spec}
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
			data = events.SlotChanged{Ref: ref, Spec: sl.Spec}
		default:
			continue
		}
		d.add(sl.Group, &d.slotWrites, write(events.SlotAggregate(sl.Name), slotSeq(s, sl.Name), now, data))
	}

	for _, name := range sortedNames(s.Groups) {
		v := s.Groups[name]
		if v.Retired || inFile[name] || !mine(name) {
			continue
		}
		d.add(name, &d.retireGroups, write(events.GroupAggregate(name), v.Seq, now, events.GroupRetired{Ref: events.Ref{Group: name, Cause: cause}}))
	}

	if len(problems) > 0 {
		return nil, &ConfigError{Source: cfg.Source, Problems: sortProblems(problems)}
	}
	// The file's groups first, in file order, then the groups leaving it.
	order := make(map[string]int, len(cfg.Groups))
	for i, g := range cfg.Groups {
		order[g.Name] = i
	}
	slices.SortStableFunc(d.groups, func(a, b string) int {
		ia, okA := order[a]
		ib, okB := order[b]
		switch {
		case okA && okB:
			return ia - ib
		case okA:
			return -1
		case okB:
			return 1
		}
		return 0
	})
	return d, nil
}

// slotsToRetire are the slots in the views (of group only, or of any group)
// that are not in the file, by name.
func (d *decision) slotsToRetire(s *projections.State, only string, slotInFile map[string]bool) []string {
	var names []string
	if only == "" {
		names = sortedNames(s.Slots)
	} else if g := s.Groups[only]; g != nil {
		names = g.Slots
	}
	var out []string
	for _, name := range names {
		v := s.Slots[name]
		if v == nil || v.Retired || slotInFile[name] || (only != "" && v.Group != only) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// maxSizeProblem applies the maxSize rule to the i-th group of the file,
// whose spec differs from the views' v: a lowered maxSize must hold the
// group's live claims in service that stay (a slot leaving the file has its
// claim failed in the same decision). ok is false when the change is refused.
func maxSizeProblem(cfg *Config, i int, s *projections.State, v *projections.Group, slotInFile map[string]bool) (p Problem, ok bool) {
	g := cfg.Groups[i]
	newMax := g.Spec.MaxSize
	if newMax <= 0 || newMax == v.Spec.MaxSize {
		return Problem{}, true
	}
	live, leaving := 0, 0
	for _, slot := range v.Slots {
		sl := s.Slots[slot]
		c := s.LiveOfSlot(slot)
		if sl == nil || c == nil || sl.Decommissioned != nil || !slotInFile[slot] {
			continue
		}
		live++
		if !c.WantsMachine() {
			leaving++
		}
	}
	if live <= newMax {
		return Problem{}, true
	}
	scaling := ""
	if leaving > 0 {
		scaling = fmt.Sprintf(" (%d of them scaling down)", leaving)
	}
	return cfg.groupProblem(i, "maxSize",
		"group %s has %d live claims%s, more than the new maxSize %d: scale it down to %d first (DecreaseTargetSize, DeleteNodes or deleting claims), then lower maxSize",
		g.Name, live, scaling, newMax, newMax), false
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

// groupProblem is a Problem about field of the i-th group, at its line in
// the file when the config came from one.
func (c *Config) groupProblem(i int, field, format string, args ...any) Problem {
	g := c.Groups[i]
	return g.lines.problem("groups", i, g.Line, groupFieldsReported, field, fmt.Sprintf(format, args...))
}

// problem is a Problem about field of the i-th slot, at its line in the
// file when the config came from one.
func (c *Config) problem(i int, field, format string, args ...any) Problem {
	sl := c.Slots[i]
	return sl.lines.problem("slots", i, sl.Line, slotFieldsReported, field, fmt.Sprintf(format, args...))
}
