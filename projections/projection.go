package projections

import (
	"io"

	"github.com/claimstream/claimstream/events"
)

// Projection is a read model folded beside the views by the same fold
// (the cost index, the timeline index). The runner hands it every event
// right after the views folded it, under their lock, so it is never ahead
// of them nor behind; its part is saved in the views' snapshot, so a start
// restores it with them and reads the log once.
type Projection interface {
	// Name keys its part of a snapshot. It never changes.
	Name() string
	// Restore makes the projection begin at the views st: from part, its
	// part of the snapshot st came from, read as it is expanded (nothing
	// read from it may be kept past Restore without a copy), or, part nil,
	// from nothing. With no part and st.Seq > 0, the events up to st.Seq
	// are out of its reach (the log's start expired and no snapshot holds
	// its part). An error leaves it as Restore(st, nil) would.
	Restore(st *State, part Part) error
	// Apply folds e, which the views st have just folded. It runs under
	// the views' write lock: it must be quick, must not block and must not
	// call the runner.
	Apply(st *State, e events.Event)
	// WritePart writes its part of a snapshot of the views as they are
	// now to w, as it is encoded (it runs under their read lock, so no
	// Apply runs meanwhile).
	WritePart(w io.Writer) error
}
