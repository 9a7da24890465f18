package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// fieldsOf decodes one JSON object per line and returns, by event id,
// its top-level field names, sorted.
func fieldsOf(t *testing.T, path, lines string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(lines))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v: %s", path, err, sc.Text())
		}
		var id string
		_ = json.Unmarshal(m["id"], &id)
		out[id] = slices.Sorted(maps.Keys(m))
	}
	if len(out) == 0 {
		t.Fatalf("%s: no events", path)
	}
	return out
}

// webhook records what a sink posts: the structured body's fields, or the
// binary mode's ce- headers (without the prefix) and "data".
type webhook struct {
	mu  sync.Mutex
	got map[string][]string
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var fields []string
	id := r.Header.Get("Ce-Id")
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/cloudevents+json") {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(body, &m)
		_ = json.Unmarshal(m["id"], &id)
		fields = slices.Sorted(maps.Keys(m))
	} else {
		for k := range r.Header {
			if name, ok := strings.CutPrefix(strings.ToLower(k), "ce-"); ok {
				fields = append(fields, name)
			}
		}
		if r.Header.Get("Content-Type") != "" {
			fields = append(fields, "datacontenttype")
		}
		if len(body) > 0 {
			fields = append(fields, "data")
		}
		slices.Sort(fields)
	}
	h.mu.Lock()
	h.got[id] = fields
	h.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
}

// TestOneEventShapeEverywhere: the REST listing, `events -o json`, `events
// export` and the webhook sinks (structured and binary mode) name an event's
// fields the same: the CloudEvents attributes and the claimstream
// extensions, sequence included.
func TestOneEventShapeEverywhere(t *testing.T) {
	f := resttest.Scripted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	paths := map[string]map[string][]string{}
	paths["events -o json"] = fieldsOf(t, "events -o json", runCLI(t, f, "events", "--type", "ClaimFailed", "-o", "json"))
	paths["events export"] = fieldsOf(t, "events export", runCLI(t, f, "events", "export", "--type", "ClaimFailed"))
	req, _ := http.NewRequestWithContext(ctx, "GET", f.Server.URL+"/api/v1/events?type=ClaimFailed", nil)
	req.Header.Set("Authorization", "Bearer "+resttest.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	paths["GET /api/v1/events"] = fieldsOf(t, "GET /api/v1/events", string(b))

	// A command's answer carries the events it wrote in the same shape.
	req, _ = http.NewRequestWithContext(ctx, "POST", f.Server.URL+"/api/v1/slots/node-3.lan/recommission", strings.NewReader(`{"by":"carol"}`))
	req.Header.Set("Authorization", "Bearer "+resttest.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Events []json.RawMessage `json:"events"`
	}
	err = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	if err != nil || len(answer.Events) != 1 {
		t.Fatalf("recommission answer: %d events, %v", len(answer.Events), err)
	}
	commandFields := fieldsOf(t, "command answer", string(answer.Events[0]))
	exported := fieldsOf(t, "events export --slot node-3.lan", runCLI(t, f, "events", "export", "--slot", "node-3.lan"))
	for id, fields := range commandFields {
		if !slices.Equal(exported[id], fields) {
			t.Errorf("a command's answer names event %s's fields %v; events export names them %v", id, fields, exported[id])
		}
	}

	structured, binary := &webhook{got: map[string][]string{}}, &webhook{got: map[string][]string{}}
	hs, hb := httptest.NewServer(structured), httptest.NewServer(binary)
	defer hs.Close()
	defer hb.Close()
	cfg, err := sinks.ParseConfig([]byte("sinks:\n" +
		"  - {name: structured, url: " + hs.URL + ", mode: structured, start: all, types: [ClaimFailed]}\n" +
		"  - {name: binary, url: " + hb.URL + ", mode: binary, start: all, types: [ClaimFailed]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := len(paths["events export"])
	sctx, stop := context.WithCancel(ctx)
	d := &sinks.Dispatcher{JS: f.H.Store.JetStream(), Store: f.H.Store, Config: cfg, Logger: slog.New(slog.DiscardHandler), FetchWait: 200 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- d.Run(sctx) }()
	eventstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		structured.mu.Lock()
		binary.mu.Lock()
		defer structured.mu.Unlock()
		defer binary.mu.Unlock()
		if len(structured.got) < want || len(binary.got) < want {
			return errNotYet
		}
		return nil
	})
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	paths["sink, structured mode"] = structured.got
	paths["sink, binary mode"] = binary.got

	ref := paths["events export"]
	for path, got := range paths {
		for id, fields := range ref {
			if !slices.Equal(got[id], fields) {
				t.Errorf("%s names event %s's fields %v; events export names them %v", path, id, got[id], fields)
			}
			for _, name := range fields {
				if !slices.Contains(events.StructuredFields, name) {
					t.Errorf("%s writes %q, not one of the shape's names %v", path, name, events.StructuredFields)
				}
			}
			if !slices.Contains(fields, "sequence") || !slices.Contains(fields, "specversion") {
				t.Errorf("%s: event %s lacks sequence or specversion: %v", path, id, fields)
			}
		}
	}
}

var errNotYet = errorString("not yet")

type errorString string

func (e errorString) Error() string { return string(e) }
