package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/provider/rest"
)

// A start that meets the log stream's consumer limit held by others waits
// instead of exiting: /readyz answers 503 naming the limit and the fix, the
// metrics show the consumers at the limit, and the start completes (the
// API ready) once another holder lets consumers go.
func TestServeStartWaitsAtAConsumerLimitHeldByOthers(t *testing.T) {
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(),
		stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn", plaintext: true, grpcAddress: freeAddr(t)}
	// A first life writes the log the second one has to read.
	_, stop := startServe(t, o)
	stop()

	o.apiAddress, o.metricsAddress, o.apiToken = freeAddr(t), freeAddr(t), "start-limit-token-0123456789abcdef0123"
	opened := make(chan *eventlog.Store, 1)
	o.storeOpened = func(st *eventlog.Store) {
		// Someone else's consumers fill the stream before the views read.
		ctx := context.Background()
		u, err := st.ConsumerUsage(ctx)
		if err != nil {
			t.Error(err)
		}
		for i := u.Consumers; i < u.Limit; i++ {
			if _, err := st.JetStream().CreateConsumer(ctx, st.Stream(), jetstream.ConsumerConfig{
				Durable: fmt.Sprintf("theirs-%d", i), AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true,
			}); err != nil {
				t.Errorf("fill the stream's consumers: %v", err)
				break
			}
		}
		opened <- st
	}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var serveErr error
	go func() {
		defer close(exited)
		serveErr = runServe(ctx, o)
	}()
	defer func() {
		cancel()
		<-exited
		if serveErr != nil {
			t.Errorf("serve: %v", serveErr)
		}
	}()
	var st *eventlog.Store
	select {
	case st = <-opened:
	case <-exited:
		t.Fatalf("serve ended before its store opened: %v", serveErr)
	case <-time.After(time.Minute):
		t.Fatal("the store did not open within a minute")
	}

	readyz := func() (int, rest.Health, error) {
		resp, err := http.Get("http://" + o.apiAddress + "/readyz")
		if err != nil {
			return 0, rest.Health{}, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var h rest.Health
		if err := json.Unmarshal(b, &h); err != nil {
			return resp.StatusCode, h, fmt.Errorf("/readyz %d: %q: %w", resp.StatusCode, b, err)
		}
		return resp.StatusCode, h, nil
	}
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		select {
		case <-exited:
			t.Fatalf("serve exited at the consumer limit: %v", serveErr)
		default:
		}
		code, h, err := readyz()
		if err != nil {
			return err
		}
		if code != http.StatusServiceUnavailable || h.Status != "starting" || !strings.Contains(h.Problem, "limit of 1000 consumers") || !strings.Contains(h.Problem, "nats consumer ls CLAIMSTREAM") {
			return fmt.Errorf("/readyz %d %+v: want 503, starting, the limit and how to list the consumers", code, h)
		}
		return nil
	})
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		n, limit, err := logConsumers(o.metricsAddress)
		if err != nil {
			return err
		}
		if n != 1000 || limit != 1000 {
			return fmt.Errorf("metrics say %d consumers of %d, want 1000 of 1000", n, limit)
		}
		return nil
	})

	// The other holder lets some go: the start completes.
	for i := range 3 {
		if err := st.JetStream().DeleteConsumer(context.Background(), st.Stream(), fmt.Sprintf("theirs-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	eventstest.CheckFor(t, 60*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-exited:
			t.Fatalf("serve exited: %v", serveErr)
		default:
		}
		code, h, err := readyz()
		if err != nil {
			return err
		}
		if code != http.StatusOK || h.Status != "ready" {
			return errors.New("not ready yet: " + h.Status + " " + h.Problem)
		}
		return nil
	})
}
