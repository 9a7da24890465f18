package projections_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

// GetNamed reads an object of the checkpoint bucket whole, into one
// buffer of its size: a large saved copy costs its size at start, not the
// doubling buffer's two to four times it.
func TestGetNamedReadsIntoOneBufferOfTheObjectsSize(t *testing.T) {
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
	got, err := cps.GetNamed(ctx, "big-1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
	}
	if cap(got) != size {
		t.Fatalf("GetNamed's buffer holds %d bytes for an object of %d", cap(got), size)
	}
	if _, err := cps.GetNamed(ctx, "missing"); err == nil {
		t.Fatal("read an object that does not exist")
	}
}
