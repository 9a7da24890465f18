package eventlog

import (
	"errors"
	"fmt"
	"strings"

	"github.com/claimstream/claimstream/events"
)

// MaxEventsPerAppend is the most events one append may carry. An append of
// several events is one JetStream atomic batch, and nats-server refuses a
// batch longer than its JetStreamLimits.MaxBatchSize (1000 unless
// configured; err_code 10199). The store checks it before sending, so a
// decision that is too large fails with ErrAppendTooLarge and sends nothing;
// a caller with more to write splits it into decisions of at most this many
// events (the pool reconciler writes one group at a time).
const MaxEventsPerAppend = 1000

// ErrAppendTooLarge is matched (errors.Is) by an append of more than
// MaxEventsPerAppend events.
var ErrAppendTooLarge = errors.New("too many events for one atomic append")

// AppendTooLargeError is an append refused before it was sent because it
// holds more than MaxEventsPerAppend events.
type AppendTooLargeError struct {
	Events int
	// Aggregates names the writes briefly: their count and the first few.
	Aggregates string
}

func (e *AppendTooLargeError) Error() string {
	return fmt.Sprintf("append of %d events to %s: more than %d events cannot be one atomic append; split the decision",
		e.Events, e.Aggregates, MaxEventsPerAppend)
}

// Is makes errors.Is(err, ErrAppendTooLarge) true.
func (e *AppendTooLargeError) Is(target error) bool { return target == ErrAppendTooLarge }

// aggregatesNamed is a short description of the aggregates of writes for an
// error: one by name, several by count and the first three ("1100
// aggregates: group/g1, slot/a, slot/b and 1097 more"). An error naming
// every aggregate of a big decision would be thousands of names long.
func aggregatesNamed(writes []events.Write) string {
	const shown = 3
	var names []string
	n := 0
	for _, w := range writes {
		if len(w.Events) == 0 {
			continue
		}
		n++
		if len(names) < shown {
			names = append(names, w.Aggregate.String())
		}
	}
	switch {
	case n == 1:
		return names[0]
	case n <= shown:
		return fmt.Sprintf("%d aggregates: %s", n, strings.Join(names, ", "))
	default:
		return fmt.Sprintf("%d aggregates: %s and %d more", n, strings.Join(names, ", "), n-shown)
	}
}
