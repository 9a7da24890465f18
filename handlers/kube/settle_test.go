package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers/kube"
)

// TestSettleChecksTheCachesOnlyAfterAWrite: with the fake's write
// generation, a Settle with nothing written since the last one returns
// without walking the caches again, and a Settle after a write still
// waits until the caches hold it.
func TestSettleChecksTheCachesOnlyAfterAWrite(t *testing.T) {
	ctx := context.Background()
	f := kube.NewFake()
	versions, checks := f.Versions("ns"), 0
	c := kube.New(f, kube.Options{Namespace: "ns", Generation: f.Generation,
		Versions: func() (map[string]string, map[string]string) { checks++; return versions() }})
	rctx, cancel := context.WithCancel(ctx)
	c.Start(rctx)
	t.Cleanup(func() { cancel(); c.Shutdown() })
	if !c.WaitForSync(rctx) {
		t.Fatal("no sync")
	}
	at := time.Unix(1000, 0)
	if err := f.RegisterNode(ctx, "n-1", "", nil, at); err != nil {
		t.Fatal(err)
	}
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Node("n-1"); !ok {
		t.Fatal("after Settle the cache lacks n-1")
	}
	before := checks
	for range 10 {
		if err := c.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if checks != before {
		t.Errorf("10 Settles with nothing written checked the caches %d more times, want 0", checks-before)
	}
	if err := f.SetNodeReady(ctx, "n-1", true, at); err != nil {
		t.Fatal(err)
	}
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if n, ok := c.Node("n-1"); !ok || !n.Ready {
		t.Fatalf("after a write and Settle the cache has n-1 %+v (present %v), want it Ready", n, ok)
	}
	if checks == before {
		t.Error("a Settle after a write did not check the caches")
	}
}
