package projections_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// ReadNamed reads an object of the checkpoint bucket whole, into one
// buffer of its size: a large saved copy costs its size at start, not the
// doubling buffer's two to four times it.
func TestReadNamedReadsIntoOneBufferOfTheObjectsSize(t *testing.T) {
	ctx := context.Background()
	st, _ := eventstest.NewStore(t)
	cps, err := projections.OpenCheckpoints(ctx, st.JetStream(), "READ_NAMED_TEST", 1)
	if err != nil {
		t.Fatal(err)
	}
	const size = 9 << 20
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	if err := cps.PutNamed(ctx, "big-1", nil, want); err != nil {
		t.Fatal(err)
	}
	allocated := func(read func() ([]byte, error)) ([]byte, uint64) {
		t.Helper()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := read()
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
		}
		return got, after.TotalAlloc - before.TotalAlloc
	}
	doubled, doubling := allocated(func() ([]byte, error) { return cps.GetNamed(ctx, "big-1") })
	exact, allocs := allocated(func() ([]byte, error) { return cps.ReadNamed(ctx, "big-1") })
	// The allocations include the chunks as the client receives them and
	// the embedded server's reads (in this process): a figure, not a test.
	t.Logf("read %d MiB: GetNamed allocated %d MiB (its buffer holds %d MiB), ReadNamed %d MiB", size>>20, doubling>>20, cap(doubled)>>20, allocs>>20)
	if cap(exact) != size {
		t.Fatalf("ReadNamed's buffer holds %d bytes for an object of %d", cap(exact), size)
	}
	if _, err := cps.ReadNamed(ctx, "missing"); err == nil {
		t.Fatal("read an object that does not exist")
	}
}
