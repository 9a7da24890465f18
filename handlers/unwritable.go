package handlers

import (
	"errors"
	"fmt"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/decide"
)

// unavailableIfUnwritable turns an append refused because the log cannot be
// written (disk full, JetStream down) into an Unavailable refusal with the
// reason: nothing was written, and a retry after the fault clears succeeds.
// cluster-autoscaler and REST clients get it at once (gRPC Unavailable,
// HTTP 503), not after their deadline.
//
// A decision too large for one atomic append (an IncreaseSize of a
// thousand claims: each claim is an event, plus the group's) is the
// caller's to split: InvalidArgument, with the limit, and nothing written.
func unavailableIfUnwritable(err error) error {
	if errors.Is(err, eventlog.ErrLogUnwritable) {
		return &decide.Error{Code: decide.CodeUnavailable, Msg: err.Error()}
	}
	if errors.Is(err, eventlog.ErrAppendTooLarge) {
		return &decide.Error{Code: decide.CodeInvalidArgument, Msg: fmt.Sprintf("%v: one call changes at most %d slots at once (each is an event, and the group records the call); ask for fewer", err, eventlog.MaxEventsPerAppend-2)}
	}
	return err
}
