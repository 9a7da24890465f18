package projections

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"github.com/claimstream/claimstream/events/eventstest"
)

// A saved copy is read whole, into one buffer of its size: a large copy
// costs its size at start, not the doubling buffer's two to four times it.
func TestIndexCopyReadsIntoOneBufferOfTheObjectsSize(t *testing.T) {
	ctx := context.Background()
	st, _ := eventstest.NewStore(t)
	cps, err := OpenCheckpoints(ctx, st.JetStream(), "READ_NAMED_TEST", 1)
	if err != nil {
		t.Fatal(err)
	}
	c := NewIndexCopies("test index", "big-", "Claimstream-Test-Event-Id", cps, CopyOptions{}, nil)
	const size = 9 << 20
	want := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	if err := c.put(ctx, "big-1", nil, want); err != nil {
		t.Fatal(err)
	}
	got, err := c.read(ctx, "big-1")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
	}
	if cap(got) != size {
		t.Fatalf("the read buffer holds %d bytes for an object of %d", cap(got), size)
	}
	if _, err := c.read(ctx, "missing"); err == nil {
		t.Fatal("read an object that does not exist")
	}
}
