package timeline_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/timeline"
)

// runTimelineIndexOnce runs idx as serve does until it is built, then
// stops it (its copy is saved as Run ends).
func runTimelineIndexOnce(t *testing.T, h *handlerstest.Harness, idx *timeline.Index) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- idx.Run(ctx, h.Views) }()
	now := h.Clock.Now().UTC()
	if _, err := idx.Timeline(ctx, now.Add(-time.Hour), now, now); err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the timeline index did not stop in 30s")
	}
}

// copyBucket is a checkpoint bucket for the copies (the fixture's views
// keep no checkpoints).
func copyBucket(t *testing.T, h *handlerstest.Harness) *projections.Checkpoints {
	t.Helper()
	cps, err := projections.OpenCheckpoints(context.Background(), h.Store.JetStream(), "TIMELINE_COPY_TEST", 1)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// copyObjects is copyBucket's bucket as the object store it is: the tests
// damage copies in it as a disk would.
func copyObjects(t *testing.T, h *handlerstest.Harness) jetstream.ObjectStore {
	t.Helper()
	obj, err := h.Store.JetStream().ObjectStore(context.Background(), "TIMELINE_COPY_TEST")
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// timelineCopyNames are the saved copies of the timeline index, oldest
// first.
func timelineCopyNames(t *testing.T, h *handlerstest.Harness) []string {
	t.Helper()
	objs, err := copyObjects(t, h).List(context.Background())
	if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
		t.Fatal(err)
	}
	var names []string
	for _, o := range objs {
		if strings.HasPrefix(o.Name, "timeline-") {
			names = append(names, o.Name)
		}
	}
	sort.Strings(names)
	return names
}

var builtFromCopy = regexp.MustCompile(`msg="timeline index built" from_seq=(\d+) .* from_copy=true`)

// A start loads the saved copy and folds only the events after it, and
// answers every window exactly as the fold of the log does.
func TestTimelineIndexFromASavedCopyAnswersAsTheLogFold(t *testing.T) {
	h := handlerstest.New(t)
	h.History(nil)
	cps := copyBucket(t, h)
	first := timeline.NewIndex(h.Store, cps, nil)
	first.KeepCopies(cps, projections.CopyOptions{Every: 1_000_000}) // only the copy at shutdown
	runTimelineIndexOnce(t, h, first)
	names := timelineCopyNames(t, h)
	if len(names) != 1 {
		t.Fatalf("copies after a run: %v, want one", names)
	}
	copySeq := h.Views.Seq()
	if want := "timeline-" + strings.Repeat("0", 20-len(itoa(copySeq))) + itoa(copySeq); names[0] != want {
		t.Fatalf("copy %s, want %s (the last event folded)", names[0], want)
	}

	// Events after the copy: the next start folds only them.
	h.MustExec(decide.ManualClaim{Slot: "node-1.lan", By: "carol"})
	h.StepTo(131 * time.Minute)
	var logs bytes.Buffer
	second := timeline.NewIndex(h.Store, cps, slog.New(slog.NewTextHandler(&logs, nil)))
	second.KeepCopies(cps, projections.CopyOptions{Every: 0})
	select {
	case <-second.FirstBuild():
		t.Fatal("FirstBuild closed before the index was built")
	default:
	}
	sameTimelines(t, h, second, 11*time.Minute)
	select {
	case <-second.FirstBuild():
	default:
		t.Fatal("FirstBuild not closed once the index was built")
	}
	if !strings.Contains(logs.String(), `msg="timeline index loaded from its saved copy" copy=`+names[0]) {
		t.Fatalf("the index did not load the copy:\n%s", logs.String())
	}
	m := builtFromCopy.FindStringSubmatch(logs.String())
	if m == nil || m[1] != itoa(copySeq+1) {
		t.Fatalf("want the events from seq %d folded after the copy:\n%s", copySeq+1, logs.String())
	}
}

// A damaged copy is reported in one line and passed over for the older
// copy, and with no usable copy left the index is built from the log: the
// timelines are the log's either way.
func TestTimelineIndexPassesOverADamagedCopy(t *testing.T) {
	h := handlerstest.New(t)
	h.History(nil)
	ctx := context.Background()
	cps := copyBucket(t, h)
	first := timeline.NewIndex(h.Store, cps, nil)
	first.KeepCopies(cps, projections.CopyOptions{Every: 1_000_000})
	runTimelineIndexOnce(t, h, first)
	h.MustExec(decide.ManualClaim{Slot: "node-1.lan", By: "carol"})
	h.StepTo(131 * time.Minute)
	second := timeline.NewIndex(h.Store, cps, nil)
	second.KeepCopies(cps, projections.CopyOptions{Every: 1_000_000})
	runTimelineIndexOnce(t, h, second)
	names := timelineCopyNames(t, h)
	if len(names) != 2 {
		t.Fatalf("copies after two runs: %v, want two", names)
	}
	older, newer := names[0], names[1]

	// The newest copy with a byte altered: the older one is loaded.
	b, err := copyObjects(t, h).GetBytes(ctx, newer)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if _, err := copyObjects(t, h).PutBytes(ctx, newer, b); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	third := timeline.NewIndex(h.Store, cps, slog.New(slog.NewTextHandler(&logs, nil)))
	third.KeepCopies(cps, projections.CopyOptions{Every: 1_000_000})
	sameTimelines(t, h, third, 11*time.Minute)
	out := logs.String()
	if n := strings.Count(out, "timeline index copy "+newer+" is damaged (checksum mismatch); trying an older copy or the log"); n != 1 {
		t.Fatalf("want one line saying %s is damaged, got %d:\n%s", newer, n, out)
	}
	if !strings.Contains(out, `msg="timeline index loaded from its saved copy" copy=`+older) {
		t.Fatalf("the older copy was not loaded:\n%s", out)
	}

	// Both damaged (the older cut short): built from the log.
	b, err = copyObjects(t, h).GetBytes(ctx, older)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := copyObjects(t, h).PutBytes(ctx, older, b[:len(b)/3]); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	fourth := timeline.NewIndex(h.Store, cps, slog.New(slog.NewTextHandler(&logs, nil)))
	fourth.KeepCopies(cps, projections.CopyOptions{Every: 1_000_000})
	sameTimelines(t, h, fourth, 11*time.Minute)
	out = logs.String()
	for _, name := range []string{newer, older} {
		if n := strings.Count(out, "timeline index copy "+name+" is damaged"); n != 1 {
			t.Fatalf("want one line saying %s is damaged, got %d:\n%s", name, n, out)
		}
	}
	if strings.Contains(out, "loaded from its saved copy") || !regexp.MustCompile(`msg="timeline index built" from_seq=1 .* from_copy=false`).MatchString(out) {
		t.Fatalf("want the index built from the log's start:\n%s", out)
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// After each save only the newest two copies are kept.
func TestTimelineIndexKeepsTheNewestTwoCopies(t *testing.T) {
	h := handlerstest.New(t)
	h.History(nil)
	cps := copyBucket(t, h)
	var seqs []uint64
	for i := range 3 {
		if i > 0 {
			// Another event after each run: each saves a new copy.
			if i == 1 {
				h.MustExec(decide.ManualClaim{Slot: "node-1.lan", By: "carol"})
			} else {
				h.MustExec(decide.Decommission{Slot: "node-2.lan", By: "dave", Reason: "fan"})
			}
			h.StepTo(time.Duration(131+10*i) * time.Minute)
		}
		idx := timeline.NewIndex(h.Store, cps, nil)
		idx.KeepCopies(cps, projections.CopyOptions{Every: 1_000_000})
		runTimelineIndexOnce(t, h, idx)
		seqs = append(seqs, h.Views.Seq())
	}
	names := timelineCopyNames(t, h)
	want := []string{copyName(seqs[1]), copyName(seqs[2])}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("copies after three runs: %v, want the newest two %v", names, want)
	}
}

func copyName(seq uint64) string {
	return "timeline-" + strings.Repeat("0", 20-len(itoa(seq))) + itoa(seq)
}
