package handlers

import (
	"errors"

	"github.com/claimstream/claimstream/events"
)

// unavailableIfUnwritable turns an append refused because the log cannot be
// written (disk full, JetStream down) into an Unavailable refusal with the
// reason: nothing was written, and a retry after the fault clears succeeds.
// cluster-autoscaler and REST clients get it at once (gRPC Unavailable,
// HTTP 503), not after their deadline.
func unavailableIfUnwritable(err error) error {
	if errors.Is(err, events.ErrLogUnwritable) {
		return &Error{Code: CodeUnavailable, Msg: err.Error()}
	}
	return err
}
