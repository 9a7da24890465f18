package sinks_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// The credentials of a webhook URL (user:pass@ and ?token=) are shown
// nowhere: not in the logs (the start's INFO line, each failed try's WARN,
// the give-up's ERROR, for a status answer and for a transport error,
// whose *url.Error prints the URL), not in the consumer's description
// (which any subscriber reads through CONSUMER.INFO; an existing consumer's
// old description is replaced at start), not in the dead letter as stored
// on its stream or as listed, not in a redelivery's error, not in a backup
// file or what restoring it brings back.
func TestWebhookURLCredentialsAreShownNowhere(t *testing.T) {
	secrets := []string{"hookuser", "hookpass-s3cret", "tok-s3cret-abc", "sig-s3cret-xyz"}
	h := handlerstest.New(t)
	var mu sync.Mutex
	tries := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries++
		n := tries
		mu.Unlock()
		if n%2 == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		// A transport error: net/http's *url.Error quotes the URL.
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	leaky := "http://hookuser:hookpass-s3cret@" + host + "/x?token=tok-s3cret-abc&Sig=sig-s3cret-xyz#frag"
	clean := "http://" + host + "/x"
	cfg := sinkConfig(t, fmt.Sprintf(`
sinks:
  - name: leaky
    url: %q
    types: [ClaimCreated]
    start: all
    maxAttempts: 2
    backoff: {initial: 1ms, max: 1ms}
`, leaky))
	ctx := context.Background()
	js := h.Store.JetStream()
	// A consumer left by a run that wrote the whole URL into its description.
	if _, err := js.CreateConsumer(ctx, h.Store.Stream(), jetstream.ConsumerConfig{
		Durable: "sink-leaky", Description: "claimstream webhook sink leaky -> " + leaky, AckPolicy: jetstream.AckExplicitPolicy,
		FilterSubjects: cfg.Sinks[0].FilterSubjects(h.Store.Subjects()), DeliverPolicy: jetstream.DeliverAllPolicy, MaxAckPending: 1, MaxDeliver: -1,
	}); err != nil {
		t.Fatal(err)
	}
	logs, log := logcapture.New(slog.LevelDebug)
	d := &sinks.Dispatcher{JS: js, Store: h.Store, Config: cfg, Clock: clock.RealClock{}, Logger: log, FetchWait: 200 * time.Millisecond}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(rctx) }()
	h.Declare("g", events.GroupSpec{}, "a")
	h.MustExec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "test"})
	eventstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if dl, err := sinks.ReadDeadLetters(ctx, js, h.Store, "leaky"); err != nil || len(dl) == 0 {
			return fmt.Errorf("no dead letter yet (%v)", err)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	noSecret := func(what, text string) {
		t.Helper()
		for _, s := range secrets {
			if i := strings.Index(text, s); i >= 0 {
				t.Errorf("%s shows %q: ...%q...", what, s, text[max(0, i-80):min(len(text), i+80)])
			}
		}
	}

	// The logs name the sink's URL, without its credentials.
	for _, l := range []struct{ level, msg string }{{"INFO", "sink delivering"}, {"WARN", "answered 503"}, {"WARN", "EOF"}, {"ERROR", "sink gave up"}} {
		if len(logs.Lines("level="+l.level, l.msg, clean)) == 0 {
			t.Errorf("no %s line %q naming %s:\n%s", l.level, l.msg, clean, logs)
		}
	}
	noSecret("the logs", logs.String())

	cons, err := js.Consumer(ctx, h.Store.Stream(), "sink-leaky")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "claimstream webhook sink leaky -> " + clean; info.Config.Description != want {
		t.Errorf("consumer description %q, want %q", info.Config.Description, want)
	}

	// The record as stored (what a subscriber reads on the dead-letter
	// stream), as listed (the REST API), and a failed redelivery's error.
	dls, err := js.Stream(ctx, sinks.DeadLetterStream(h.Store))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := dls.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw.Data), clean) {
		t.Errorf("the dead letter does not name the URL: %s", raw.Data)
	}
	noSecret("the dead letter on its stream", string(raw.Data))
	listed, err := d.ListDeadLetters(ctx, "leaky")
	if err != nil || len(listed) == 0 {
		t.Fatalf("list: %v, %v", listed, err)
	}
	noSecret("the listed dead letter", listed[0].LastError)
	res, err := d.Redeliver(ctx, sinks.RedeliverRequest{All: true})
	if err != nil || len(res) == 0 || res[0].Delivered {
		t.Fatalf("redeliver: %+v, %v; want a failure", res, err)
	}
	noSecret("the redelivery's error", res[0].Error)
	noSecret("the logs after the redelivery", logs.String())

	// A backup file, and the consumer a restore of it brings back.
	path := filepath.Join(t.TempDir(), "log.backup")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zero := sha256.Sum256(nil)
	m, err := eventlog.WriteBackup(ctx, h.Server.Conn, h.Store.Stream(), f, func(context.Context, uint64) (string, error) {
		return hex.EncodeToString(zero[:]), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	noSecret("the backup file", string(b))
	rf, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	restored := eventstest.StartServer(t)
	if err := eventlog.RestoreBackup(ctx, restored.Conn, rf, m); err != nil {
		t.Fatal(err)
	}
	rjs, err := jetstream.New(restored.Conn)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rjs.Consumer(ctx, h.Store.Stream(), "sink-leaky")
	if err != nil {
		t.Fatalf("the restored consumer: %v", err)
	}
	noSecret("the restored consumer's description", rc.CachedInfo().Config.Description)
}
