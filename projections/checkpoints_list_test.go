package projections

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// openCheckpointsOn opens the checkpoint bucket on srv.
func openCheckpointsOn(t *testing.T, srv *eventstest.Server) *Checkpoints {
	t.Helper()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cps, err := OpenCheckpoints(ctx, js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	return cps
}

// A bucket of many checkpoints is listed from their names: a list after
// a restart reads none of their records, so the server loads none of the
// blocks that hold them (each would stay in its cache, block by block).
func TestListingCheckpointsLoadsNoBlocks(t *testing.T) {
	srv := eventstest.StartServer(t)
	cps := openCheckpointsOn(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(3, 4))
	data := make([]byte, 2<<20)
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123456, time.UTC)
	const n = 40
	for i := 1; i <= n; i++ {
		if _, err := cps.save(ctx, data, uint64(i*100), at.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	srv.Restart()
	cps = openCheckpointsOn(t, srv)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	list, err := cps.List(ctx)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != n {
		t.Fatalf("listed %d checkpoints, saved %d", len(list), n)
	}
	for i, cp := range list {
		want := at.Add(time.Duration(i+1) * time.Hour)
		if cp.Seq != uint64((i+1)*100) || !cp.Time.Equal(want) {
			t.Fatalf("checkpoint %d listed as seq %d at %v, saved as seq %d at %v", i, cp.Seq, cp.Time, (i+1)*100, want)
		}
	}
	// The bucket holds 80 MiB in 8 MiB blocks: reading the records
	// would keep most of them in the server's cache.
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 16<<20 {
		t.Fatalf("listing %d checkpoints of 2 MiB grew the heap by %d MiB", n, grew>>20)
	}
	st, err := cps.Load(ctx, 2000)
	if err == nil || st != nil {
		// The data is no snapshot: it is read, and refused as one.
		t.Fatalf("a checkpoint of random bytes decoded: %v", err)
	}
	got, err := readObject(ctx, cps.js, cps.obj, mustName(t, cps, 2000))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the listed checkpoint at seq 2000 does not read back: %v", err)
	}
}

// A deleted checkpoint is no longer listed, nor is its record kept;
// checkpoints named as earlier versions named them are listed with the
// time their record holds, and one an earlier version deleted is not.
func TestCheckpointsListedAfterDeletesAndLegacyNames(t *testing.T) {
	cps := openCheckpointsOn(t, eventstest.StartServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	legacy := func(seq uint64, last time.Time) {
		t.Helper()
		_, err := cps.obj.Put(ctx, jetstream.ObjectMeta{
			Name: legacyCheckpointName(seq),
			Headers: map[string][]string{
				checkpointSeqHeader:  {strconv.FormatUint(seq, 10)},
				checkpointTimeHeader: {last.Format(time.RFC3339Nano)},
			},
		}, bytes.NewReader([]byte("legacy")))
		if err != nil {
			t.Fatal(err)
		}
	}
	legacy(10, at)
	legacy(20, at.Add(time.Hour))
	if err := cps.obj.Delete(ctx, legacyCheckpointName(20)); err != nil {
		t.Fatal(err)
	}
	for i := uint64(3); i <= 5; i++ {
		if _, err := cps.save(ctx, []byte("new"), i*10, at.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if err := cps.Delete(ctx, 40); err != nil {
		t.Fatal(err)
	}
	list, err := cps.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []CheckpointInfo{{Seq: 10, Time: at, Size: 6}, {Seq: 30, Time: at.Add(3 * time.Hour)}, {Seq: 50, Time: at.Add(5 * time.Hour)}}
	if len(list) != len(want) {
		t.Fatalf("listed %+v, want %+v", list, want)
	}
	for i := range want {
		if list[i].Seq != want[i].Seq || !list[i].Time.Equal(want[i].Time) || list[i].Size != want[i].Size {
			t.Fatalf("listed %+v, want %+v", list, want)
		}
	}
	names, err := cps.objectNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if name == legacyCheckpointName(20) || name == checkpointName(40, at.Add(4*time.Hour)) {
			t.Fatalf("the record of deleted checkpoint %s is still there", name)
		}
	}
	if got, err := readObject(ctx, cps.js, cps.obj, mustName(t, cps, 10)); err != nil || string(got) != "legacy" {
		t.Fatalf("the legacy checkpoint at seq 10 reads %q, %v", got, err)
	}
	// Listed once, the legacy checkpoint bears this version's name: a
	// list reads its record no more.
	if !slices.Contains(names, checkpointName(10, at)) || slices.Contains(names, legacyCheckpointName(10)) {
		t.Fatalf("after a list, the bucket holds %v: the legacy checkpoint at seq 10 is not renamed", names)
	}
	// A delete that stopped before it purged the record: listed, then
	// found deleted by a load, which purges it. (Another process's
	// Checkpoints: this one keeps what it saved in memory.)
	if err := cps.obj.Delete(ctx, mustName(t, cps, 50)); err != nil {
		t.Fatal(err)
	}
	other, err := OpenCheckpoints(ctx, cps.js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := other.List(ctx); err != nil || len(list) != 3 {
		t.Fatalf("with the record of a deleted checkpoint left, listed %+v, %v", list, err)
	}
	if _, err := other.Load(ctx, 50); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("a deleted checkpoint loads: %v", err)
	}
	list, err = other.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[1].Seq != 30 {
		t.Fatalf("after the load of a deleted checkpoint, listed %+v", list)
	}
}

// A rename of a legacy checkpoint writes the new record, then purges the
// old: a process killed between the two leaves both names. The next list
// shows the checkpoint once, under its new name, and drops the old
// record; a legacy checkpoint stored apart under a taken name goes with
// its chunks.
func TestLegacyCheckpointLeftBesideItsRename(t *testing.T) {
	cps := openCheckpointsOn(t, eventstest.StartServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	headers := func(seq uint64) map[string][]string {
		return map[string][]string{
			checkpointSeqHeader:  {strconv.FormatUint(seq, 10)},
			checkpointTimeHeader: {at.Format(time.RFC3339Nano)},
		}
	}
	// Seq 10: renamed, then its old record written back as the killed
	// rename left it.
	if _, err := cps.obj.Put(ctx, jetstream.ObjectMeta{Name: legacyCheckpointName(10), Headers: headers(10)}, bytes.NewReader([]byte("ten"))); err != nil {
		t.Fatal(err)
	}
	stream, err := cps.bucketStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldSubject := cps.metaPrefix() + base64.URLEncoding.EncodeToString([]byte(legacyCheckpointName(10)))
	old, err := stream.GetLastMsgForSubject(ctx, oldSubject)
	if err != nil {
		t.Fatal(err)
	}
	if err := cps.obj.UpdateMeta(ctx, legacyCheckpointName(10), jetstream.ObjectMeta{Name: checkpointName(10, at), Headers: headers(10)}); err != nil {
		t.Fatal(err)
	}
	if _, err := cps.js.Publish(ctx, oldSubject, old.Data); err != nil {
		t.Fatal(err)
	}
	// Seq 20: a legacy checkpoint and a new one, stored apart.
	if _, err := cps.obj.Put(ctx, jetstream.ObjectMeta{Name: legacyCheckpointName(20), Headers: headers(20)}, bytes.NewReader([]byte("twenty, legacy"))); err != nil {
		t.Fatal(err)
	}
	legacy20, err := cps.obj.GetInfo(ctx, legacyCheckpointName(20))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cps.save(ctx, []byte("twenty"), 20, at); err != nil {
		t.Fatal(err)
	}
	other, err := OpenCheckpoints(ctx, cps.js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	names, err := other.objectNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 4 {
		t.Fatalf("before the list, the bucket holds %v, want both names of seqs 10 and 20", names)
	}
	list, err := other.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Seq != 10 || list[1].Seq != 20 {
		t.Fatalf("listed %+v, want seqs 10 and 20 once each", list)
	}
	names, err = other.objectNames(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if want := []string{checkpointName(10, at), checkpointName(20, at)}; !slices.Equal(names, want) {
		t.Fatalf("after the list, the bucket holds %v, want %v", names, want)
	}
	for seq, want := range map[uint64]string{10: "ten", 20: "twenty"} {
		st, err := readObject(ctx, other.js, other.obj, mustName(t, other, seq))
		if err != nil || string(st) != want {
			t.Fatalf("checkpoint %d reads %q, %v; want %q", seq, st, err, want)
		}
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter("$O."+other.bucket+".C."+legacy20.NUID))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(info.State.Subjects); n != 0 {
		t.Fatalf("the chunks of the legacy checkpoint at seq 20 are still stored (%d subjects)", n)
	}
}

// Checkpoint names carry their sequence and time; anything else in the
// bucket is not taken for one.
func TestCheckpointNames(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.FixedZone("x", 3600))
	name := checkpointName(123, at)
	if name != "cp-00000000000000000123-20260304T040607.000000008Z" {
		t.Fatalf("name %q", name)
	}
	seq, last, legacy, ok := parseCheckpointName(name)
	if !ok || legacy || seq != 123 || !last.Equal(at) {
		t.Fatalf("%q reads as %d, %v, legacy %v, ok %v", name, seq, last, legacy, ok)
	}
	if seq, _, legacy, ok := parseCheckpointName(legacyCheckpointName(77)); !ok || !legacy || seq != 77 {
		t.Fatalf("legacy name reads as %d, legacy %v, ok %v", seq, legacy, ok)
	}
	for _, bad := range []string{"", "cp-", "views", "cp-12", "cp-0000000000000000012x", "cp-00000000000000000123+20260304T040607.000000008Z", "cp-00000000000000000123-yesterday", "xx-00000000000000000123"} {
		if _, _, _, ok := parseCheckpointName(bad); ok {
			t.Errorf("%q read as a checkpoint's name", bad)
		}
	}
}

// FuzzParseCheckpointName: a name from the bucket never panics the
// parser, and one it reads as a checkpoint's is the name checkpointName
// gives that sequence and time (or legacyCheckpointName that sequence).
func FuzzParseCheckpointName(f *testing.F) {
	f.Add(checkpointName(123, time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)))
	f.Add(legacyCheckpointName(77))
	f.Add("cp-00000000000000000123-20260304T040607.000000008Z")
	f.Add("views")
	f.Fuzz(func(t *testing.T, name string) {
		seq, last, legacy, ok := parseCheckpointName(name)
		switch {
		case !ok:
		case legacy && name != legacyCheckpointName(seq):
			t.Fatalf("%q read as the legacy name of seq %d", name, seq)
		case !legacy && name != checkpointName(seq, last):
			t.Fatalf("%q read as seq %d at %v, whose name is %q", name, seq, last, checkpointName(seq, last))
		}
	})
}

func mustName(t *testing.T, cps *Checkpoints, seq uint64) string {
	t.Helper()
	name, err := cps.nameOf(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// saveCheckpoints folds n events, each declaring a group, and saves a
// checkpoint after each: at seqs 1 to n.
func saveCheckpoints(ctx context.Context, t *testing.T, cps *Checkpoints, n uint64) {
	t.Helper()
	st := NewState()
	at := time.Date(2026, 3, 4, 0, 0, 0, 0, time.UTC)
	for seq := uint64(1); seq <= n; seq++ {
		_ = Evolve(st, events.Event{Seq: seq, Time: at, Data: events.GroupDeclared{Ref: events.Ref{Group: "g" + strconv.FormatUint(seq, 10), Cause: "test"}}})
		if _, err := cps.Save(ctx, st, at); err != nil {
			t.Fatal(err)
		}
	}
}

// A checkpoint loads by its sequence on a handle that has neither saved
// nor listed it (another process's, a restarted one's).
func TestACheckpointLoadsOnAFreshHandle(t *testing.T) {
	srv := eventstest.StartServer(t)
	cps := openCheckpointsOn(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	saveCheckpoints(ctx, t, cps, 1)
	fresh := openCheckpointsOn(t, srv)
	got, err := fresh.Load(ctx, 1)
	if err != nil || got.Seq != 1 {
		t.Fatalf("a fresh handle loads seq 1: %v", err)
	}
	if err := fresh.Delete(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if list, err := cps.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after a fresh handle's delete, listed %+v, %v", list, err)
	}
}

// unansweredLookups is JetStream on a loaded cluster right after a create:
// a stream lookup gets no answer until answered is set.
type unansweredLookups struct {
	jetstream.JetStream
	answered atomic.Bool
}

func (u *unansweredLookups) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	if !u.answered.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return u.JetStream.Stream(ctx, name)
}

// Opening the bucket asks the cluster only to create it: a lookup that
// goes unanswered fails the list that needs it, not the start, and the
// next list looks again.
func TestCheckpointsOpenWhileLookupsGoUnanswered(t *testing.T) {
	srv := eventstest.StartServer(t)
	real, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	js := &unansweredLookups{JetStream: real}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cps, err := OpenCheckpoints(ctx, js, "", 1)
	if err != nil {
		t.Fatalf("open with lookups unanswered: %v", err)
	}
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if _, err := cps.save(ctx, []byte("views"), 7, at); err != nil {
		t.Fatalf("save with lookups unanswered: %v", err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = cps.List(lctx)
	lcancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("list with lookups unanswered: %v, want the lookup's deadline", err)
	}
	js.answered.Store(true)
	got, err := cps.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seq != 7 || !got[0].Time.Equal(at) {
		t.Fatalf("listed %+v, want the checkpoint at seq 7", got)
	}
}

// The oldest checkpoint that covers the expired events is the oldest in
// the bucket: one whose delete stopped before its record was purged is
// listed, found deleted and passed over.
func TestOldestCoveringPassesOverAHalfDeletedCheckpoint(t *testing.T) {
	srv := eventstest.StartServer(t)
	cps := openCheckpointsOn(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	saveCheckpoints(ctx, t, cps, 3)
	if err := cps.obj.Delete(ctx, mustName(t, cps, 1)); err != nil {
		t.Fatal(err)
	}
	other := openCheckpointsOn(t, srv)
	got, info, err := other.OldestCovering(ctx, eventlog.Bounds{First: 2, Last: 5})
	if err != nil {
		t.Fatalf("oldest covering with a half-deleted checkpoint: %v", err)
	}
	if info.Seq != 2 || got == nil || got.Seq != 2 {
		t.Fatalf("oldest covering is seq %d, want 2", info.Seq)
	}
	if list, err := other.List(ctx); err != nil || len(list) != 2 || list[0].Seq != 2 {
		t.Fatalf("after passing over the half-deleted checkpoint, listed %+v, %v", list, err)
	}
}
