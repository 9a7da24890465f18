package whatif

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/scale"
	"github.com/claimstream/claimstream/projections"
)

// Recording is what a replay needs of the recorded log, read once.
type Recording struct {
	From, To time.Time
	// Baseline is the pool as the log declared it at From.
	Baseline *pool.Config
	// Requests are the recorded size calls in [From, To), in log order.
	Requests []events.ScaleRequested
	// RequestTimes are their times.
	RequestTimes []time.Time
	// Work is the built-in groups' pods over [From, To), as the demand
	// facts tell them (work.go).
	Work []PodWork
	// DemandChanges counts the DemandObserved facts read.
	DemandChanges int
	// LiveAtFrom counts each cluster-autoscaler group's claims that wanted
	// a machine at From: asked again at From (docs/whatif.md).
	LiveAtFrom map[string]int
	// Models are the machines as their history shows them.
	Models Models
	// Events are the recorded events of [From, To) and the config before,
	// for measuring the recorded outcome the same way as a replay's.
	Recorded Outcome
	// PodsPerNode is how many pods the simulated scheduler puts on one
	// machine: the recorded config's smallest built-in podsPerNode (a
	// machine's capacity is not the candidate's to change); 0 when no
	// group is built-in (the simulator's default).
	PodsPerNode int
	// LastSeq is the log's last sequence when it was read.
	LastSeq uint64
}

// ErrEmptyWindow: the period is empty or reversed.
var ErrEmptyWindow = errors.New("the period is empty: --to must be after --from")

// ErrNothingToReplay: the log declares no pool at the period's start.
var ErrNothingToReplay = errors.New("nothing to replay")

// Read reads the recorded log up to To (never writing to it) and builds
// the recording of [from, to). minSamples is the history a slot needs
// before its own model replaces its group's (default MinSamples).
func Read(ctx context.Context, store *eventlog.Store, from, to time.Time, minSamples int) (*Recording, error) {
	if !to.After(from) {
		return nil, ErrEmptyWindow
	}
	last, err := store.LastSeq(ctx)
	if err != nil {
		return nil, fmt.Errorf("what-if: read the recorded log: %w", err)
	}
	rec := &Recording{From: from, To: to, LastSeq: last, LiveAtFrom: map[string]int{}}
	st := projections.NewState()
	hist := newHistory()
	meas := newMeasure(from, to)
	var before []events.Event // the config events before From, for the cost fold
	started := false
	// The built-in groups observe the same cluster: one group's facts
	// (the first by name) tell its work.
	demandGroup := ""
	var demand []demandPoint
	var demandBefore *demandPoint
	observed := func(at time.Time, d events.DemandObserved) *demandPoint {
		if demandGroup == "" {
			demandGroup = d.Group
		}
		if d.Group != demandGroup {
			return nil
		}
		return &demandPoint{at: at, demand: d.Demand, running: d.Running}
	}
	err = store.Read(ctx, 1, last, func(e events.Event) error {
		if e.Data == nil || !e.Time.Before(to) {
			return nil
		}
		hist.apply(e)
		if !e.Time.Before(from) && !started {
			// The config written as the period begins (before anything
			// else happens in it: a pool declared by the serve that
			// starts the recording) is the baseline's too.
			switch {
			case isConfig(e):
				_ = projections.Evolve(st, e)
			case e.Type == events.TypeLeaderElected:
				// A serve that starts the recording elects itself before
				// it applies its pool file: nothing happened yet.
			default:
				started = true
			}
		}
		if e.Time.Before(from) {
			_ = projections.Evolve(st, e) // a refused event stays out of the views, as in serve
			before = append(before, e)
			if d, ok := e.Data.(events.DemandObserved); ok {
				if p := observed(from, d); p != nil {
					demandBefore = p
				}
			}
			return nil
		}
		if before != nil {
			for _, b := range before {
				meas.apply(b)
			}
			before = nil
		}
		meas.apply(e)
		switch d := e.Data.(type) {
		case events.ScaleRequested:
			rec.Requests = append(rec.Requests, d)
			rec.RequestTimes = append(rec.RequestTimes, e.Time)
		case events.DemandObserved:
			rec.DemandChanges++
			if p := observed(e.Time, d); p != nil {
				demand = append(demand, *p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("what-if: read the recorded log: %w", err)
	}
	for _, b := range before {
		meas.apply(b)
	}
	if demandBefore != nil {
		demand = slices.Insert(demand, 0, *demandBefore)
	}
	rec.Work = workOf(demand)
	rec.Baseline = configAt(st)
	if len(rec.Baseline.Groups) == 0 {
		return nil, fmt.Errorf("what-if: the log declares no group at %s: %w", from.Format(time.RFC3339), ErrNothingToReplay)
	}
	for _, g := range rec.Baseline.Groups {
		if g.Spec.Scaler == events.ScalerBuiltin {
			if n := scale.OptionsOf(g.Spec.Builtin).PodsPerNodeOrDefault(); rec.PodsPerNode == 0 || n < rec.PodsPerNode {
				rec.PodsPerNode = n
			}
			continue
		}
		n := 0
		for _, cl := range st.LiveClaims(g.Name) {
			if cl.WantsMachine() {
				n++
			}
		}
		if n > 0 {
			rec.LiveAtFrom[g.Name] = n
		}
	}
	rec.Models = hist.models(rec.Baseline, minSamples)
	rec.Recorded = meas.outcome("recorded")
	return rec, nil
}

// configAt is the pool the views declare: its groups and slots in name
// order, with their specs as recorded.
func configAt(st *projections.State) *pool.Config {
	cfg := &pool.Config{Source: "recorded"}
	for _, name := range slices.Sorted(maps.Keys(st.Groups)) {
		g := st.Groups[name]
		if g.Retired {
			continue
		}
		cfg.Groups = append(cfg.Groups, pool.Group{Name: name, Spec: g.Spec})
	}
	for _, name := range slices.Sorted(maps.Keys(st.Slots)) {
		sl := st.Slots[name]
		if sl.Retired || st.Groups[sl.Group] == nil || st.Groups[sl.Group].Retired {
			continue
		}
		cfg.Slots = append(cfg.Slots, pool.Slot{Name: name, Group: sl.Group, Spec: sl.Spec})
	}
	return cfg
}

// isConfig: an event of the declared pool (what the pool file writes).
func isConfig(e events.Event) bool {
	switch e.Data.(type) {
	case events.GroupDeclared, events.GroupChanged, events.GroupRetired,
		events.SlotDeclared, events.SlotChanged, events.SlotRetired:
		return true
	}
	return false
}
