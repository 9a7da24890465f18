package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/provider/rest"
)

// flakyHook is a webhook that answers 503 until fixed, and records the ids
// of the events it accepted.
type flakyHook struct {
	mu       sync.Mutex
	fixed    bool
	accepted []string
}

func (h *flakyHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.fixed {
		http.Error(w, "receiver down", http.StatusServiceUnavailable)
		return
	}
	h.accepted = append(h.accepted, r.Header.Get("Ce-Id"))
	w.WriteHeader(http.StatusAccepted)
}

var anyID = regexp.MustCompile(`[0-9a-f]{32}`)

// TestCLISinksDeadLettersAndRedeliver: against a real embedded JetStream
// store and an httptest webhook, a sink that gives up dead-letters its
// events; `sinks dead-letters` lists them; `sinks redeliver` with the
// receiver still down keeps them and fails; a bad id, an id named twice,
// an unknown sink or a wildcard changes nothing and says why;
// once the receiver is back, redeliver sends each through the sink and
// removes it, and the list is empty.
func TestCLISinksDeadLettersAndRedeliver(t *testing.T) {
	h := handlerstest.New(t)
	hook := &flakyHook{}
	hs := httptest.NewServer(hook)
	defer hs.Close()
	cfg, err := sinks.ParseConfig([]byte("sinks:\n  - {name: alerts, url: " + hs.URL + ", maxAttempts: 1, start: all, types: [SlotDeclared]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	d := &sinks.Dispatcher{JS: h.Store.JetStream(), Store: h.Store, Config: cfg, Clock: h.Clock, Logger: quiet, FetchWait: 100 * time.Millisecond}
	api := httptest.NewServer(rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: "dl-token", Logger: quiet, DeadLetters: d, Sinks: sinkNames(cfg)}))
	defer api.Close()
	h.Declare("g", events.GroupSpec{}, "a", "b")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dctx, stop := context.WithCancel(ctx)
	delivering := make(chan error, 1)
	go func() { delivering <- d.Run(dctx) }()
	eventstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		l, err := d.ListDeadLetters(ctx, "")
		if err == nil && len(l) < 2 {
			err = fmt.Errorf("%d dead letters", len(l))
		}
		return err
	})
	stop()
	if err := <-delivering; err != nil {
		t.Fatal(err)
	}

	run := func(args ...string) string {
		return runCLIAt(t, api.URL, "dl-token", args...)
	}
	var out strings.Builder
	step := func(args ...string) {
		out.WriteString("$ claimstream " + strings.Join(args, " ") + "\n")
		out.WriteString(anyID.ReplaceAllString(run(args...), "<event-id>"))
	}
	step("sinks", "dead-letters")
	step("sinks", "dead-letters", "-o", "json")
	step("sinks", "redeliver", "1")
	step("sinks", "redeliver", "99")
	step("sinks", "redeliver", "1", "--all")
	step("sinks", "redeliver", "--all", "--sink", "nope")
	step("sinks", "dead-letters", "--sink", "nope")
	step("sinks", "dead-letters", "--sink", "*")
	step("sinks", "dead-letters", "--sink", ">")
	step("sinks", "redeliver", "1", "2", "1")
	step("sinks", "dead-letters", "--sink", "alerts")
	hook.mu.Lock()
	hook.fixed = true
	hook.mu.Unlock()
	step("sinks", "redeliver", "1")
	step("sinks", "redeliver", "--all", "--sink", "alerts")
	step("sinks", "dead-letters")
	checkGolden(t, "sinks-dead-letters", out.String())

	hook.mu.Lock()
	defer hook.mu.Unlock()
	if len(hook.accepted) != 2 || hook.accepted[0] == hook.accepted[1] {
		t.Fatalf("the receiver accepted %v, want the two dead-lettered events once each", hook.accepted)
	}

	// The redelivery is a state-changing call: no token, no redelivery.
	resp, err := http.Post(api.URL+"/api/v1/sinks/dead-letters/redeliver", "application/json", strings.NewReader(`{"all":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("redeliver without the token: %d", resp.StatusCode)
	}
	var l rest.DeadLetterList
	c := &rest.Client{BaseURL: api.URL, Token: "dl-token"}
	if l, err = c.ListDeadLetters(ctx, ""); err != nil || len(l.Items) != 0 {
		b, _ := json.Marshal(l)
		t.Fatalf("after redelivery: %s %v", b, err)
	}
	if !slices.Contains(hook.accepted, anyID.FindString(hook.accepted[0])) {
		t.Fatal("accepted ids are not event ids")
	}
}

// runCLIAt runs one CLI invocation against server with token.
func runCLIAt(t *testing.T, server, token string, args ...string) string {
	t.Helper()
	root := NewRoot()
	var out strings.Builder
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append(append([]string{}, args...), "--server", server, "--token", token, "--cli-config", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		out.WriteString("error: " + err.Error() + "\n")
	}
	return out.String()
}
