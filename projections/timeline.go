package projections

// TimelineStepsPerKind bounds a claim's timeline: it keeps this many steps
// of one kind (same type, phase and cause); a later one is folded into the
// last of them, which counts it in Repeats. A scale-down that never lands
// fires shutdowns and pauses forever, and its claim must not grow without
// bound in the views (the log keeps every event).
const TimelineStepsPerKind = 6

// addStep appends st to c's timeline, or folds it into the newest step of
// its kind once the timeline holds TimelineStepsPerKind of them.
func addStep(c *Claim, st Step) {
	n, last := 0, -1
	for i := range c.Timeline {
		if sameKind(c.Timeline[i], st) {
			n, last = n+1, i
		}
	}
	if n < TimelineStepsPerKind {
		c.Timeline = append(c.Timeline, st)
		return
	}
	old := &c.Timeline[last]
	old.Seq, old.At, old.Detail = st.Seq, st.At, st.Detail
	old.Repeats++
}

func sameKind(a, b Step) bool {
	return a.Type == b.Type && a.Phase == b.Phase && a.Cause == b.Cause
}
