package handlers_test

import (
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

// An IncreaseSize whose claims and group event do not fit one atomic
// append is refused as the caller's to split (InvalidArgument, naming the
// limit), and writes nothing; the most that fits lands.
func TestIncreaseSizeTooLargeForOneAppendIsRefusedClearly(t *testing.T) {
	h := handlerstest.New(t)
	spec := events.GroupSpec{MaxSize: eventlog.MaxEventsPerAppend}
	h.Declare("g", spec, handlerstest.Slots("s", eventlog.MaxEventsPerAppend-1)...)
	h.Declare("g", spec, "s-last")
	var before uint64
	h.Read(func(s *projections.State) { before = s.Seq })

	_, err := h.Exec(decide.IncreaseSize{Group: "g", Delta: eventlog.MaxEventsPerAppend, RequestedBy: "ca"})
	if decide.CodeOf(err) != decide.CodeInvalidArgument {
		t.Fatalf("IncreaseSize of %d: got %v (code %v), want InvalidArgument", eventlog.MaxEventsPerAppend, err, decide.CodeOf(err))
	}
	var after uint64
	h.Read(func(s *projections.State) { after = s.Seq })
	if after != before {
		t.Fatalf("a refused IncreaseSize wrote events %d..%d", before+1, after)
	}
	// The claims, the group's SizeIncreased and ScaleRequested: one append.
	most := eventlog.MaxEventsPerAppend - 2
	res := h.MustExec(decide.IncreaseSize{Group: "g", Delta: most, RequestedBy: "ca"})
	if n := len(res.Claims()); n != most {
		t.Fatalf("IncreaseSize of %d created %d claims", most, n)
	}
}
