package rest_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// Every CloudEvent the API emits (the listing, the export, the event
// stream) is one sdk-go accepts (event.Validate), and its sequence
// extension sorts as the log does: "00000000000000000010" after
// "00000000000000000009", where "10" would sort before "9".
func TestEmittedCloudEventsValidateAndSortBySequence(t *testing.T) {
	f := resttest.Scripted(t)
	last, err := f.H.Store.LastSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if last < 10 {
		t.Fatalf("the history has %d events: the test needs sequences past 9", last)
	}
	check := func(where string, lines []string) {
		t.Helper()
		var prev string
		for i, line := range lines {
			var ce event.Event
			if err := json.Unmarshal([]byte(line), &ce); err != nil {
				t.Fatalf("%s line %d: not a CloudEvent: %v: %s", where, i+1, err, line)
			}
			if err := ce.Validate(); err != nil {
				t.Fatalf("%s line %d: invalid CloudEvent: %v", where, i+1, err)
			}
			seq, _ := ce.Extensions()[events.ExtSequence].(string)
			if len(seq) != events.SequenceDigits || seq <= prev {
				t.Fatalf("%s line %d: sequence %q after %q: want %d digits, rising as strings", where, i+1, seq, prev, events.SequenceDigits)
			}
			prev = seq
		}
		if n, _ := events.ParseSequence(prev); n != last {
			t.Fatalf("%s: last sequence %q, want %d", where, prev, last)
		}
	}
	for _, path := range []string{"/api/v1/events", "/api/v1/events/export"} {
		check(path, getLines(t, f, path, func(s string) (string, bool) { return s, true }))
	}
	// The event stream: each data line is one event; read up to the last.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.Server.URL+"/api/v1/events/stream?from=1", nil)
	req.Header.Set("Authorization", "Bearer "+resttest.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var data []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for uint64(len(data)) < last && sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	check("/api/v1/events/stream", data)
}

// getLines GETs path and returns its lines that keep says to keep.
func getLines(t *testing.T, f *resttest.Fixture, path string, keep func(string) (string, bool)) []string {
	t.Helper()
	resp, err := f.Client.Do(context.Background(), "GET", path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l, ok := keep(sc.Text()); ok && l != "" {
			out = append(out, l)
		}
	}
	return out
}

// Every dataschema is an identifier (the schema's $id) whose path the API
// serves, without a token: the schema it names. Nothing else is served
// under that path.
func TestDataSchemaPathsServeTheirSchemas(t *testing.T) {
	f := resttest.Start(t)
	get := func(p string) (int, string, map[string]any) {
		t.Helper()
		resp, err := http.Get(f.Server.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), body
	}
	for _, ty := range append(events.Types(), "defs") {
		id := "https://claimstream.dev/schemas/events/defs.v1.json"
		if ty != "defs" {
			id = events.SchemaURL(ty)
		}
		u, err := url.Parse(id)
		if err != nil {
			t.Fatal(err)
		}
		code, ct, body := get(u.Path)
		if code != http.StatusOK || ct != "application/schema+json" || body["$id"] != id {
			t.Errorf("GET %s: %d %s $id %v, want the schema %s", u.Path, code, ct, body["$id"], id)
		}
	}
	for _, p := range []string{"/schemas/events/Nope.v1.json", "/schemas/events/..%2fopenapi.yaml", "/schemas/events/.hidden.json", "/schemas/events/defs.v1.txt"} {
		if code, _, _ := get(p); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, code)
		}
	}
}
