package rest_test

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections/timeline"
	"github.com/claimstream/claimstream/projections/timeline/timelinetest"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

func getTimeline(t *testing.T, f *resttest.Fixture, query string) (timeline.Timeline, *http.Response) {
	t.Helper()
	req, _ := http.NewRequest("GET", f.Server.URL+"/api/v1/timeline?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+resttest.Token)
	// Asked for explicitly, Go's transport does not decompress: the test
	// sees the encoding the server chose.
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	}
	var tl timeline.Timeline
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(body).Decode(&tl); err != nil {
			t.Fatal(err)
		}
	}
	return tl, resp
}

// phaseAt is the phase a timeline row shows at ms: its bar covering ms,
// else off.
func phaseAt(tl timeline.Timeline, row int, ms int64) (phase, claim string) {
	phase = "off"
	for k := 0; k < len(tl.Bars); k += 5 {
		if int(tl.Bars[k]) == row && tl.Bars[k+1] <= ms && ms < tl.Bars[k+2] {
			phase = tl.Phases[tl.Bars[k+3]]
			if c := tl.Bars[k+4]; c >= 0 {
				claim = tl.Claims[c]
			}
		}
	}
	return phase, claim
}

// TestTimelineAgreesWithTheLiveViewsAtEveryPoint: at every moment of the
// scripted history, the bar the timeline draws for each slot is the phase
// the live views showed then (a failed claim's slot shows failed while off).
func TestTimelineAgreesWithTheLiveViewsAtEveryPoint(t *testing.T) {
	f := resttest.Scripted(t)
	since := handlerstest.Start
	until := f.H.Clock.Now().UTC()
	tl, resp := getTimeline(t, f, "since="+since.Format(time.RFC3339)+"&until="+until.Format(time.RFC3339))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Errorf("a client that takes gzip got %q", resp.Header.Get("Content-Encoding"))
	}
	if want := []string{"gpu-1", "node-1.lan", "node-2.lan", "node-3.lan"}; fmt.Sprint(tl.Slots) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v (group, then name)", tl.Slots, want)
	}
	row := map[string]int{}
	for i, s := range tl.Slots {
		row[s] = i
	}
	lastAt := map[time.Time]resttest.Point{}
	for _, p := range f.Points {
		lastAt[p.At] = p
	}
	checked := 0
	for at, p := range lastAt {
		ms := at.Sub(since).Milliseconds()
		if at.Equal(until) {
			ms-- // the window's end is open
			if ms < 0 {
				continue
			}
		}
		for _, sl := range p.Views.Slots {
			want, wantClaim := string(sl.Phase), sl.LiveClaim
			if want == "off" && sl.LastClaim != nil && sl.LastClaim.Phase == "failed" {
				want, wantClaim = "failed", sl.LastClaim.Claim
			}
			got, claim := phaseAt(tl, row[sl.Name], ms)
			if got != want || claim != wantClaim {
				t.Errorf("%s at %s: timeline %s/%q, views %s/%q", sl.Name, at.Format("15:04:05"), got, claim, want, wantClaim)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("checked %d slot-moments", checked)
	}
	// The failures carry their reasons: node-1.lan's deadline, node-3.lan's Job.
	var fails []string
	for k := 0; k < len(tl.Failures); k += 4 {
		at := since.Add(time.Duration(tl.Failures[k+1]) * time.Millisecond)
		fails = append(fails, fmt.Sprintf("%s %s %s %s", tl.Slots[tl.Failures[k]], at.Format("15:04:05"), tl.Claims[tl.Failures[k+2]], tl.Reasons[tl.Failures[k+3]]))
	}
	want := []string{
		"node-1.lan 09:13:11 " + f.Claims["first"] + " DeadlineExceeded",
		"node-3.lan 09:19:00 " + f.Claims["broken"] + " StartupJobFailed",
	}
	if fmt.Sprint(fails) != fmt.Sprint(want) {
		t.Fatalf("failures\n %v\nwant\n %v", fails, want)
	}
	if tl.Events == 0 || tl.Seq == 0 {
		t.Fatalf("events %d seq %d", tl.Events, tl.Seq)
	}
}

// TestTimelineWindowStartsFromTheReplayedViews: a window that opens in the
// middle of the history starts each row with the phase the views had then
// (node-2.lan, ready since 09:04:27, is ready from the window's first ms).
func TestTimelineWindowStartsFromTheReplayedViews(t *testing.T) {
	f := resttest.Scripted(t)
	since := handlerstest.Start.Add(30 * time.Minute)
	tl, resp := getTimeline(t, f, "since="+url.QueryEscape(since.Format(time.RFC3339))+"&until="+url.QueryEscape(since.Add(time.Hour).Format(time.RFC3339)))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	row := map[string]int{}
	for i, s := range tl.Slots {
		row[s] = i
	}
	if got, claim := phaseAt(tl, row["node-2.lan"], 0); got != "ready" || claim != f.Claims["steady"] {
		t.Fatalf("node-2.lan at the window's start: %s %q", got, claim)
	}
	if len(tl.Failures) != 0 {
		t.Fatalf("failures before the window are listed: %v", tl.Failures)
	}
}

func TestTimelineRefusesABadWindow(t *testing.T) {
	f := resttest.Scripted(t)
	before, _ := f.H.Store.LastSeq(context.Background())
	for query, want := range map[string]string{
		"since=yesterday": "since: want an RFC 3339 time",
		"since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z": "must be before until",
		"since=2026-01-01T00:00:00Z&until=2026-03-01T00:00:00Z": "longer than",
		"window=1h": "unknown query parameter",
	} {
		req, _ := http.NewRequest("GET", f.Server.URL+"/api/v1/timeline?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+resttest.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body rest.ErrorBody
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.Error, want) {
			t.Errorf("%s: %d %q, want 400 with %q", query, resp.StatusCode, body.Error, want)
		}
	}
	if after, _ := f.H.Store.LastSeq(context.Background()); after != before {
		t.Fatalf("a refused request wrote")
	}
}

// sseReader reads server-sent events: (id, data) pairs.
type sseReader struct{ sc *bufio.Scanner }

func (r sseReader) next() (id string, data string, err error) {
	for r.sc.Scan() {
		line := r.sc.Text()
		switch {
		case line == "" && data != "":
			return id, data, nil
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	if err := r.sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", io.EOF
}

func openSSE(t *testing.T, f *resttest.Fixture, query, lastID string) (sseReader, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", f.Server.URL+"/api/v1/events/stream?"+query, nil)
	req.Header.Set("Authorization", "Bearer "+resttest.Token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return sseReader{bufio.NewScanner(resp.Body)}, resp
}

// TestEventStreamIsResumableByLastEventID: the stream's ids are the log
// sequences; a new event arrives live; a reconnect with Last-Event-ID gets
// exactly the events after it.
func TestEventStreamIsResumableByLastEventID(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	last, _ := f.H.Store.LastSeq(ctx)
	r, resp := openSSE(t, f, "last=2", "")
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("%d %q", resp.StatusCode, ct)
	}
	for _, want := range []uint64{last - 1, last} {
		id, data, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		var e rest.Event
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatal(err)
		}
		if id != fmt.Sprint(want) || e.Seq != want {
			t.Fatalf("id %s seq %d, want %d", id, e.Seq, want)
		}
	}
	// Live: a claim made now is streamed.
	f.H.MustExec(decide.ManualClaim{Slot: "node-1.lan", By: "carol"})
	got := make(chan rest.Event, 1)
	go func() {
		_, data, err := r.next()
		var e rest.Event
		if err == nil {
			_ = json.Unmarshal([]byte(data), &e)
		}
		got <- e
	}()
	select {
	case e := <-got:
		if e.Seq != last+1 || e.Slot != "node-1.lan" {
			t.Fatalf("live event %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no live event in 10s")
	}
	// Resume after the first of the scripted history's last two events.
	r2, _ := openSSE(t, f, "last=1", fmt.Sprint(last-1))
	var ids []string
	for range 2 {
		id, _, err := r2.next()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if fmt.Sprint(ids) != fmt.Sprint([]string{fmt.Sprint(last), fmt.Sprint(last + 1)}) {
		t.Fatalf("resumed with ids %v, want %d and %d", ids, last, last+1)
	}
	// A garbled Last-Event-ID is refused, with what is wanted.
	_, bad := openSSE(t, f, "", "abc")
	if bad.StatusCode != http.StatusBadRequest {
		t.Fatalf("garbled Last-Event-ID: %d", bad.StatusCode)
	}
	eventstest.ValidateLog(t, f.H.Store)
}

// FuzzEventStreamLastEventID sends arbitrary Last-Event-ID headers: a
// sequence resumes the stream, anything else is a 400 naming the header;
// never a panic nor a 5xx.
func FuzzEventStreamLastEventID(f *testing.F) {
	for _, s := range []string{"1", "0", " 7 ", "-1", "abc", "18446744073709551616", ""} {
		f.Add(s)
	}
	fx := resttest.Scripted(f)
	h := fx.Server.Config.Handler
	f.Fuzz(func(t *testing.T, id string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		stop := time.AfterFunc(50*time.Millisecond, cancel)
		defer stop.Stop()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://api.test/api/v1/events/stream", nil)
		req.Header.Set("Authorization", "Bearer "+resttest.Token)
		req.Header["Last-Event-ID"] = []string{id}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch {
		case rec.Code >= 500:
			t.Fatalf("Last-Event-ID %q: %d %s", id, rec.Code, rec.Body.String())
		case rec.Code == http.StatusBadRequest && !strings.Contains(rec.Body.String(), "Last-Event-ID"):
			t.Fatalf("Last-Event-ID %q: refused without naming the header: %s", id, rec.Body.String())
		}
	})
}

// TestTimelineOlderThanTheIndexIsFoldedFromTheLog: the index drops what
// ended more than timeline.MaxWindow before the newest event; a window
// from then is still answered, folded from the log, the same as before.
func TestTimelineOlderThanTheIndexIsFoldedFromTheLog(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	since, until := handlerstest.Start, handlerstest.Start.Add(130*time.Minute)
	want, err := timeline.Build(ctx, f.H.Store, f.H.Views.Checkpoints(), since, until, until)
	if err != nil {
		t.Fatal(err)
	}
	// Forty days later, a new claim: the index prunes the scripted history.
	f.H.Clock.SetTime(handlerstest.Start.Add(40 * 24 * time.Hour))
	f.H.MustExec(decide.ManualClaim{Slot: "node-1.lan", By: "dave"})
	idx, err := timeline.NewIndex(ctx, f.H.Views, f.H.Store, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idx.Timeline(ctx, since, until, until); err == nil {
		t.Fatal("the index answered a window it pruned")
	}
	got, resp := getTimeline(t, f, "since="+since.Format(time.RFC3339)+"&until="+until.Format(time.RFC3339))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if g, w := timelinetest.Canonical(got), timelinetest.Canonical(want); g != w {
		t.Fatalf("an old window through the API:\n%s\nwant\n%s", g, w)
	}
	// The recent past is still cut from the index.
	now := f.H.Clock.Now().UTC()
	recent, err := idx.Timeline(ctx, now.Add(-time.Hour), now, now)
	if err != nil || !strings.Contains(timelinetest.Canonical(recent), "bar node-1.lan") {
		t.Fatalf("recent window from the index: %v\n%s", err, timelinetest.Canonical(recent))
	}
}
