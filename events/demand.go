package events

import "time"

// Demand facts (docs/whatif.md): what was asked of a group, recorded apart
// from what claimstream decided about it, so a what-if replay can ask the
// same of another pool config.
const (
	// TypeScaleRequested: cluster-autoscaler (or a scenario, an operator
	// through the provider) called IncreaseSize, DecreaseTargetSize or
	// DeleteNodes on the group; accepted or refused.
	TypeScaleRequested Type = "ScaleRequested"
	// TypeDemandObserved: the built-in scaler saw the work it sizes a
	// group for change.
	TypeDemandObserved Type = "DemandObserved"
)

// RefusalRepeatWindow: a refused call repeated with the same reason within
// this window of the group's last recorded refusal is counted on the
// views, not written again (cluster-autoscaler retries every loop).
const RefusalRepeatWindow = time.Minute

// ScaleRequested is one call on the group's size. An accepted call is
// written in the same append as the claims, cancellations or scale-downs it
// decided; a refused one alone, with the refusal's words in Reason.
type ScaleRequested struct {
	Ref
	// Call is IncreaseSize, DecreaseTargetSize or DeleteNodes.
	Call string `json:"call"`
	// Delta as called (negative for DecreaseTargetSize); Nodes for
	// DeleteNodes, as named by the caller.
	Delta     int      `json:"delta,omitempty"`
	Nodes     []string `json:"nodes,omitempty"`
	Requester string   `json:"requester"`
	Accepted  bool     `json:"accepted"`
	Reason    string   `json:"reason,omitempty"`
	// Repeats counts the identical refusals since the group's previous
	// recorded one that were not written (RefusalRepeatWindow).
	Repeats int `json:"repeats,omitempty"`
}

// DemandObserved is the work the built-in scaler saw for the group, written
// when it differs from the group's last DemandObserved (never per pass).
type DemandObserved struct {
	Ref
	// Demand is the pods the work needs (scale.Demand: replicas, Job
	// parallelism, bare pods); Pending and Running count the tenant pods
	// not yet bound and bound.
	Demand  int `json:"demand"`
	Pending int `json:"pending"`
	Running int `json:"running"`
}

func (ScaleRequested) EventType() Type { return TypeScaleRequested }
func (DemandObserved) EventType() Type { return TypeDemandObserved }
