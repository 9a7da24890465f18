package whatif

import "time"

// PodWork is one pod of a built-in group's work: when it arrived and how
// long it ran once on a node (0: still running at the period's end).
type PodWork struct {
	Arrive time.Time     `json:"arrive"`
	Runs   time.Duration `json:"runs"`
}

// demandPoint is one DemandObserved: the pods wanted and those running.
type demandPoint struct {
	at      time.Time
	demand  int
	running int
}

// workOf reads pods out of the demand facts, first in first out: a rise of
// the demand is pods arriving, a fall pods finishing, a rise of the running
// count pods starting. The i-th pod arrives at the i-th arrival and runs
// from the i-th start to the i-th finish: the time it held a node under
// the recorded config, which a replay gives it again whenever it gets one.
// Two changes between one observation and the next that cancel out (a pod
// arriving as another finishes) are not seen: docs/whatif.md.
func workOf(points []demandPoint) []PodWork {
	var arrivals, starts, finishes []time.Time
	prev := demandPoint{}
	for _, p := range points {
		for range p.demand - prev.demand {
			arrivals = append(arrivals, p.at)
		}
		for range prev.demand - p.demand {
			finishes = append(finishes, p.at)
		}
		for len(starts) < len(finishes)+p.running {
			starts = append(starts, p.at)
		}
		prev = p
	}
	out := make([]PodWork, len(arrivals))
	for i, a := range arrivals {
		out[i].Arrive = a
		if i >= len(finishes) {
			continue
		}
		start := a
		if i < len(starts) && starts[i].After(a) {
			start = starts[i]
		}
		// A pod that finished ran for some time: at least a moment, since
		// a zero would read "runs forever" to the simulator.
		out[i].Runs = max(finishes[i].Sub(start), time.Second)
	}
	return out
}
