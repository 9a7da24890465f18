package events

// Write is the events one decision appends to one aggregate, with the
// aggregate's last sequence as the decider saw it (0: no event yet).
type Write struct {
	Aggregate Aggregate
	Expected  uint64
	Events    []Event
}
