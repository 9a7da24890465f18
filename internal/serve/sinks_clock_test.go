package serve

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/sinks"
)

// TestSinksRunOnThePlanesClock: the sinks get the plane's clock (under the
// simulator, its scaled clock), not the wall clock: a dead-letter record
// carries the plane's time.
func TestSinksRunOnThePlanesClock(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	planeTime := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	quietLog := slog.New(slog.NewTextHandler(io.Discard, nil))
	p, err := startPlane(ctx, serveOptions{dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true}, quietLog, clocktesting.NewFakeClock(planeTime), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.emb.Shutdown)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }))
	defer hook.Close()
	if p.sinks, err = sinks.ParseConfig([]byte("sinks:\n  - name: hook\n    url: " + hook.URL + "\n    maxAttempts: 1\n    start: all\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.store.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: planeTime, Data: events.GroupDeclared{
		Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler},
	}}); err != nil {
		t.Fatal(err)
	}
	var record sinks.DeadLetter
	errFound := errors.New("found")
	err = p.withSinks(ctx, func(ctx context.Context) error {
		for {
			st, err := p.store.JetStream().Stream(ctx, sinks.DeadLetterStream(p.store))
			if err == nil {
				if msg, err := st.GetMsg(ctx, 1); err == nil {
					if err := json.Unmarshal(msg.Data, &record); err != nil {
						return err
					}
					return errFound
				} else if !errors.Is(err, jetstream.ErrMsgNotFound) {
					return err
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	if !errors.Is(err, errFound) {
		t.Fatalf("no dead-letter record: %v", err)
	}
	if !record.Time.Equal(planeTime) {
		t.Fatalf("dead-letter record at %s, want the plane's time %s", record.Time, planeTime)
	}
}
