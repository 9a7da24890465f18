package projections

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventstest"
)

// objectBucket is a bucket on a real server, with chunks of 64 KiB so a
// few hundred KiB span several.
func objectBucket(t *testing.T) (jetstream.JetStream, jetstream.ObjectStore) {
	t.Helper()
	st, _ := eventstest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	obs, err := st.JetStream().CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "objects"})
	if err != nil {
		t.Fatal(err)
	}
	return st.JetStream(), obs
}

func putObject(t *testing.T, obs jetstream.ObjectStore, name string, data []byte) *jetstream.ObjectInfo {
	t.Helper()
	info, err := obs.Put(context.Background(), jetstream.ObjectMeta{Name: name, Opts: &jetstream.ObjectMetaOptions{ChunkSize: 64 << 10}}, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// An object reads back as the object store wrote it, whole, whatever its
// size against the chunks': none, less than one, exactly some, a part of
// the last.
func TestReadObjectReadsWhatPutWrote(t *testing.T) {
	js, obs := objectBucket(t)
	ctx := context.Background()
	for i, n := range []int{0, 1, 64 << 10, 3 * 64 << 10, 300_001} {
		want := randomBytes(n, uint64(i))
		info := putObject(t, obs, "o", want)
		got, err := readObject(ctx, js, obs, "o")
		if err != nil {
			t.Fatalf("%d bytes in %d chunks: %v", n, info.Chunks, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes in %d chunks read back as %d other bytes", n, info.Chunks, len(got))
		}
	}
	if _, err := readObject(ctx, js, obs, "none"); !errors.Is(err, jetstream.ErrObjectNotFound) {
		t.Fatalf("a missing object: %v, want ErrObjectNotFound", err)
	}
}

// Reading an object allocates it once, plus each chunk as the embedded
// server copies it out of its block and the client receives it: less than
// the object store's Get, whose push consumer buffers every chunk on both
// sides and whose read grows its result as it goes. The allocations are
// the process's (the server runs in it): the least of three reads of each
// leaves out what other goroutines allocated meanwhile.
func TestReadObjectAllocatesLessThanGet(t *testing.T) {
	js, obs := objectBucket(t)
	ctx := context.Background()
	const size = 4 << 20
	putObject(t, obs, "o", randomBytes(size, 7))
	allocated := func(read func() ([]byte, error)) uint64 {
		least := uint64(math.MaxUint64)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			b, err := read()
			runtime.ReadMemStats(&after)
			if err != nil || len(b) != size {
				t.Fatalf("read %d bytes: %v", len(b), err)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	ours := allocated(func() ([]byte, error) { return readObject(ctx, js, obs, "o") })
	gets := allocated(func() ([]byte, error) { return obs.GetBytes(ctx, "o") })
	t.Logf("reading %d MiB: %.1f MiB allocated, the object store's Get %.1f MiB", size>>20, float64(ours)/(1<<20), float64(gets)/(1<<20))
	if ours > gets*3/5 {
		t.Fatalf("reading %d MiB allocated %.1f MiB, more than 3/5 of the object store's Get (%.1f MiB)", size>>20, float64(ours)/(1<<20), float64(gets)/(1<<20))
	}
}

// An object replaced while it is read (its old chunks purged by the new
// one's Put) is read again from its new record.
func TestReadObjectRereadsAnObjectReplacedMidRead(t *testing.T) {
	js, obs := objectBucket(t)
	ctx := context.Background()
	old := putObject(t, obs, "o", randomBytes(200_000, 1))
	want := randomBytes(150_000, 2)
	putObject(t, obs, "o", want)
	if _, err := readChunks(ctx, js, obs, old); !errors.Is(err, errObjectReplaced) {
		t.Fatalf("the old record's chunks, purged: %v, want errObjectReplaced", err)
	}
	got, err := readObject(ctx, js, obs, "o")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the new object: %d bytes, %v", len(got), err)
	}
}

// A chunk gone from the bucket, a chunk whose bytes changed and a record
// that claims more than a snapshot may hold are refused, in words that
// say which.
func TestReadObjectRefusesADamagedObject(t *testing.T) {
	js, obs := objectBucket(t)
	ctx := context.Background()
	stream, err := js.Stream(ctx, "OBJ_objects")
	if err != nil {
		t.Fatal(err)
	}
	chunkSeq := func(info *jetstream.ObjectInfo, i int) uint64 {
		t.Helper()
		var seq uint64
		for range i + 1 {
			m, err := stream.GetMsg(ctx, seq+1, jetstream.WithGetMsgSubject("$O.objects.C."+info.NUID))
			if err != nil {
				t.Fatal(err)
			}
			seq = m.Sequence
		}
		return seq
	}

	gone := putObject(t, obs, "gone", randomBytes(200_000, 3))
	if err := stream.DeleteMsg(ctx, chunkSeq(gone, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := readObject(ctx, js, obs, "gone"); err == nil || !strings.Contains(err.Error(), "the bucket holds 3 of its 4 chunks") {
		t.Fatalf("a deleted chunk: %v", err)
	}

	// The second chunk deleted and written again with other bytes: the
	// chunks are whole in number and size, their digest is not.
	changed := putObject(t, obs, "changed", randomBytes(200_000, 4))
	m, err := stream.GetMsg(ctx, chunkSeq(changed, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(ctx, m.Sequence); err != nil {
		t.Fatal(err)
	}
	other := bytes.Clone(m.Data)
	other[0]++
	if _, err := js.Publish(ctx, m.Subject, other); err != nil {
		t.Fatal(err)
	}
	if _, err := readObject(ctx, js, obs, "changed"); !errors.Is(err, jetstream.ErrDigestMismatch) {
		t.Fatalf("a changed chunk: %v, want ErrDigestMismatch", err)
	}

	huge := *gone
	huge.Size = maxObjectSize + 1
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = readChunks(ctx, js, obs, &huge)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a record of %d bytes: %v", huge.Size, err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("refusing it allocated %d MiB", grew>>20)
	}
}
