package pool

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/projections"
)

// Applier writes a pool file to the log through the command service, one
// group at a time.
//
// One append holds at most eventlog.MaxEventsPerAppend events, and a pool of
// thousands of slots is more than that, so the file is not one decision:
// each group is its own command (GroupCommand), locked on the group like
// the group's other commands, and a group with more writes than one append
// holds is written in several decisions. Every decision is a prefix of what
// ReconcileGroup returns, which is safe to land alone (a group before its
// slots, its slots retired before the group). A half-applied file is a pool
// of whole groups plus, at most, one group with some of its slots; the
// reconciler is idempotent, so applying the file again (a restart, the next
// change, SIGHUP) writes exactly what is left.
type Applier struct {
	Service *handlers.Service
	Views   *projections.Runner
	Clock   clock.PassiveClock
	Log     *slog.Logger
}

// Applied is what one Apply wrote.
type Applied struct {
	// Groups and Events count what was written; Planned* what the file
	// asked for when the apply began.
	Groups, Events               int
	PlannedGroups, PlannedEvents int
	// Last is the sequence of the last event written (0: none).
	Last uint64
}

// Apply makes the log match cfg. The whole file is checked first against
// the views (Reconcile): a file the views refuse writes nothing. Then each
// group with something to write is applied, with one log line per group
// ("pool file: applied group", group 12/100, events 1200/11000). An error
// past the first group says how far the apply got; what landed stays, and
// applying the file again continues from there.
func (a *Applier) Apply(ctx context.Context, cfg *Config) (Applied, error) {
	log := a.Log
	if log == nil {
		log = slog.Default()
	}
	var plan *decision
	var err error
	now := a.Clock.Now().UTC()
	a.Views.Read(func(s *projections.State) { plan, err = reconcile(cfg, s, now, "") })
	if err != nil {
		return Applied{}, err
	}
	out := Applied{PlannedGroups: len(plan.groups)}
	for _, g := range plan.groups {
		out.PlannedEvents += plan.eventsOf[g]
	}
	for i, group := range plan.groups {
		// Each decision writes at least one event, so a group needs at most
		// one decision per event it planned; more means something else
		// keeps changing it.
		wrote := 0
		for n := 0; ; n++ {
			if n > plan.eventsOf[group]+1 {
				return out, fmt.Errorf("pool file %s: group %s did not settle after %d decisions (%d/%d groups, %d/%d events applied)",
					cfg.Source, group, n, i, len(plan.groups), out.Events, out.PlannedEvents)
			}
			res, err := a.Service.Execute(ctx, GroupCommand{Config: cfg, Group: group})
			if err != nil {
				return out, fmt.Errorf("pool file %s: group %s not applied (%d/%d groups, %d/%d events applied; applying the file again continues from here): %w",
					cfg.Source, group, i, len(plan.groups), out.Events, out.PlannedEvents, err)
			}
			wrote += len(res.Events)
			out.Events += len(res.Events)
			if res.Last != 0 {
				out.Last = res.Last
			}
			// Done when nothing is left, or when all that was planned
			// landed (saves a decision that would find nothing).
			if len(res.Events) == 0 || wrote >= plan.eventsOf[group] {
				break
			}
		}
		if wrote > 0 {
			out.Groups++
		}
		log.Info("pool file: applied group", "file", cfg.Source, "group", group,
			"groups", fmt.Sprintf("%d/%d", i+1, len(plan.groups)),
			"events", fmt.Sprintf("%d/%d", out.Events, out.PlannedEvents))
	}
	return out, nil
}

// GroupCommand applies the pool file to one group: the next decision of at
// most eventlog.MaxEventsPerAppend events of what ReconcileGroup returns.
// Executed until it writes nothing, it applies the whole group.
type GroupCommand struct {
	Config *Config
	Group  string
}

// LockKey is the group: the pool file's change of a group never interleaves
// with the group's IncreaseSize, so the maxSize rule holds.
func (c GroupCommand) LockKey(*projections.State) string { return c.Group }

func (c GroupCommand) Decide(s *projections.State, now time.Time) ([]events.Write, error) {
	ws, err := ReconcileGroup(c.Config, s, c.Group, now)
	if err != nil {
		return nil, err
	}
	return firstAppend(ws, eventlog.MaxEventsPerAppend), nil
}

// firstAppend is the longest prefix of ws with at most limit events (at
// least one write: no write of the reconciler has more than two events).
func firstAppend(ws []events.Write, limit int) []events.Write {
	n := 0
	for i, w := range ws {
		n += len(w.Events)
		if n > limit && i > 0 {
			return ws[:i]
		}
	}
	return ws
}
