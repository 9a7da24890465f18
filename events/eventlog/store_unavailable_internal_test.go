package eventlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"
)

// A request the cluster cannot take is made again while the caller waits,
// for at most unavailableFor when the caller set no deadline; any other
// answer ends it at once.
func TestWhileUnavailableRetriesOnlyAMomentsRefusal(t *testing.T) {
	notAvail := &jetstream.APIError{Code: 503, ErrorCode: codeClusterNotAvail, Description: "JetStream system temporarily unavailable"}
	for _, tc := range []struct {
		name  string
		err   error
		tries int
	}{
		{"another answer", &jetstream.APIError{Code: 404, ErrorCode: 10059, Description: "stream not found"}, 1},
		{"no responders, then served", nats.ErrNoResponders, 2},
		{"10008, then served", notAvail, 2},
		{"10008 for ever", notAvail, int(unavailableFor/noRespondersWait) + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Unix(0, 0))
			tries := 0
			done := make(chan error, 1)
			go func() {
				_, err := whileUnavailable(context.Background(), clk, func() (int, error) {
					tries++
					if tc.name != "10008 for ever" && tries > 1 {
						return 1, nil
					}
					return 0, tc.err
				})
				done <- err
			}()
			for {
				select {
				case err := <-done:
					if tries != tc.tries {
						t.Fatalf("%d tries, want %d", tries, tc.tries)
					}
					if want := tc.tries == 1 || tc.name == "10008 for ever"; want != (err != nil) {
						t.Fatalf("err %v after %d tries", err, tries)
					}
					if err != nil && !errors.Is(err, tc.err) {
						t.Fatalf("err %v, want %v", err, tc.err)
					}
					return
				default:
				}
				if clk.HasWaiters() {
					clk.Step(noRespondersWait)
				}
			}
		})
	}
}
