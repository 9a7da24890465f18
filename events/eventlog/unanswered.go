package eventlog

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// Unanswered reports whether a JetStream request failed only because
// JetStream was not ready to answer it: the request timed out, the meta
// leader was changing (10008), or the cluster had just formed and its
// leader had not heard from every peer yet (10005, no suitable peers).
// Such a request is worth sending again; any other error is an answer.
func Unanswered(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == codeClusterNotAvail || apiErr.ErrorCode == codeClusterNoPeers
	}
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrNoHeartbeat)
}
