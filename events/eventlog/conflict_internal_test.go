package eventlog

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
)

// Both of JetStream's "wrong last sequence" answers are a conflict: 10071
// from a single server (or an applied write), 10164 from a cluster while
// another write with the same expectation filter is being proposed.
func TestConflictCoversBothWrongLastSequenceCodes(t *testing.T) {
	s := &Store{}
	w := []events.Write{{Aggregate: events.SlotAggregate("a"), Expected: 3}}
	for _, code := range []jetstream.ErrorCode{10071, 10164} {
		err := s.appendError(&jetstream.APIError{Code: 400, ErrorCode: code, Description: "wrong last sequence"}, w)
		var ce *ConflictError
		if !errors.Is(err, ErrConflict) || !errors.As(err, &ce) || ce.Code != int(code) || ce.Expected != 3 {
			t.Fatalf("code %d: %v", code, err)
		}
	}
	if err := s.appendError(&jetstream.APIError{Code: 400, ErrorCode: 10201}, w); errors.Is(err, ErrConflict) || !isDuplicateBatch(err) {
		t.Fatalf("a duplicate batch id is not a conflict: %v", err)
	}
}

// Both ways a publish finds nobody to answer it are retried; a conflict
// or another failure is not.
func TestNoRespondersIsRetriedNothingElse(t *testing.T) {
	for _, err := range []error{nats.ErrNoResponders, jetstream.ErrNoStreamResponse, fmt.Errorf("batch message 1 ack failed: %w", nats.ErrNoResponders)} {
		if !isNoResponders(err) {
			t.Fatalf("%v is not retried", err)
		}
	}
	for _, err := range []error{nil, &ConflictError{Code: 10071}, errors.New("stream not found")} {
		if isNoResponders(err) {
			t.Fatalf("%v is retried", err)
		}
	}
}
