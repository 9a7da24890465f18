package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventstest"
)

// A subscriber holding every consumer its account may have stops nobody
// but other subscribers: serve's views, the REST API's reads of the log
// (each a consumer of the process's own) and a restart go on.
func TestServeSubscriberConsumerFloodLeavesTheAPIAndARestartUntouched(t *testing.T) {
	const token = "flood-admin-token-0123456789abcdef0123"
	const limit = 20
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "password")
	writeFile(t, pwFile, "pw")
	natsAddr, apiAddr := freeAddr(t), freeAddr(t)
	o := natsServeOptions(t, natsOptions{listen: natsAddr, subscriberUser: "subscriber", subscriberPasswordFN: pwFile, subscriberConsumers: limit})
	o.apiAddress, o.apiToken = apiAddr, token

	start := func() (stop func()) {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runServe(ctx, o) }()
		return func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	}
	get := func(path string) (int, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+apiAddr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	serving := func(when string) {
		t.Helper()
		eventstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
			code, body, err := get("/readyz")
			if err != nil || code != http.StatusOK {
				return fmt.Errorf("%s: /readyz %d %s %v", when, code, body, err)
			}
			return nil
		})
		// Reads of the log, one after another and each with a consumer
		// of its own, all answered in full.
		for i := range 5 {
			code, body, err := get("/api/v1/events")
			if err != nil || code != http.StatusOK || !strings.Contains(body, "LeaderElected") {
				t.Fatalf("%s: event listing %d: %d %v\n%s", when, i+1, code, err, body)
			}
		}
	}

	stop := start()
	serving("before the flood")
	var nc *nats.Conn
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		var err error
		nc, err = nats.Connect("nats://"+natsAddr, nats.UserInfo("subscriber", "pw"), nats.NoReconnect(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		return err
	})
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	held := 0
	var refused error
	for i := range 2 * limit {
		_, err := js.CreateOrUpdateConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{Durable: fmt.Sprintf("flood-%d", i), AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			refused = err
			break
		}
		held++
	}
	nc.Close()
	if held != limit || refused == nil || !errors.Is(refused, jetstream.ErrMaximumConsumersLimit) && !strings.Contains(refused.Error(), "maximum consumers") {
		t.Fatalf("the subscriber held %d durable consumers, then %v; want %d, then its account's limit", held, refused, limit)
	}
	serving("with the subscriber's consumers all held")

	// Durables outlive serve: the next start meets them and is not held.
	stop()
	stop = start()
	defer stop()
	serving("after a restart")
}
