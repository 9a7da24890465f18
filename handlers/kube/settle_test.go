package kube_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/kube"
)

// TestSettleChecksTheCachesOnlyAfterAWrite: with the fake's write
// generation, a Settle with nothing written since the last one returns
// without walking the caches again, and a Settle after a write still
// waits until the caches hold it.
func TestSettleChecksTheCachesOnlyAfterAWrite(t *testing.T) {
	ctx := context.Background()
	f := kube.NewFake()
	c, checks := f.NewCluster(kube.Options{Namespace: "ns"}), 0
	kube.CountFullChecks(c, &checks, false)
	startSynced(t, c)
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

// TestSettleAfterAWriteChecksWhatWasWritten: with the fake's change log,
// a Settle after a write waits for the objects written since the last
// Settle, without asking for (and copying) every Node and Job again, and
// it still waits until the cache holds the write and the watchers of
// WatchObjects were told of it; a deleted Node is waited for too.
func TestSettleAfterAWriteChecksWhatWasWritten(t *testing.T) {
	ctx := context.Background()
	f := kube.NewFake()
	c, checks := f.NewCluster(kube.Options{Namespace: "ns"}), 0
	kube.CountFullChecks(c, &checks, true)
	var mu sync.Mutex
	told := map[string]int{}
	c.WatchObjects(func(ch handlers.ObjectChange) {
		mu.Lock()
		told[ch.Name]++
		mu.Unlock()
	})
	startSynced(t, c)
	at := time.Unix(1000, 0)
	for i := range 50 {
		if err := f.RegisterNode(ctx, fmt.Sprintf("n-%d", i), "", nil, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	before := checks
	for round := range 20 {
		if err := f.SetNodeReady(ctx, "n-7", round%2 == 0, at); err != nil {
			t.Fatal(err)
		}
		if err := c.Settle(ctx); err != nil {
			t.Fatal(err)
		}
		if n, ok := c.Node("n-7"); !ok || n.Ready != (round%2 == 0) {
			t.Fatalf("round %d: after Settle the cache has n-7 %+v (present %v)", round, n, ok)
		}
		mu.Lock()
		got := told["n-7"]
		mu.Unlock()
		if got != round+2 {
			t.Fatalf("round %d: the watchers were told of n-7 %d times after Settle, want %d", round, got, round+2)
		}
	}
	if err := f.DeleteNodeObject(ctx, "n-3"); err != nil {
		t.Fatal(err)
	}
	if err := c.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Node("n-3"); ok {
		t.Fatal("after a delete and Settle the cache still has n-3")
	}
	if checks != before {
		t.Errorf("21 Settles after a write each asked for every object %d times, want 0 (the change log tells what was written)", checks-before)
	}
}

// TestFakeChangesSinceForgetsOnlyPastItsBound: the change log answers
// every generation it still reaches, in order, and says when it no longer
// reaches back (the caller then compares everything).
func TestFakeChangesSinceForgetsOnlyPastItsBound(t *testing.T) {
	ctx := context.Background()
	f := kube.NewFakeWith(kube.FakeOptions{WatchDelay: -1}) // the bookkeeping, not the lag
	at := time.Unix(1000, 0)
	if err := f.RegisterNode(ctx, "a", "", nil, at); err != nil {
		t.Fatal(err)
	}
	g := f.Generation()
	if err := f.SetNodeReady(ctx, "a", true, at); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteNodeObject(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	chs, ok := f.ChangesSince(g)
	if !ok || len(chs) != 2 || chs[0].Key != "a" || chs[0].Version == "" || chs[1].Version != "" {
		t.Fatalf("changes since %d: %+v (ok %v), want a's update then its delete", g, chs, ok)
	}
	if chs, ok := f.ChangesSince(f.Generation()); !ok || len(chs) != 0 {
		t.Fatalf("changes since now: %+v (ok %v), want none", chs, ok)
	}
	for i := range 40000 {
		if err := f.RegisterNode(ctx, fmt.Sprintf("n-%d", i), "", nil, at); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.ChangesSince(g); ok {
		t.Fatal("40,000 writes later the log still reaches back to the start")
	}
	if chs, ok := f.ChangesSince(f.Generation() - 10); !ok || len(chs) != 10 || chs[9].Key != "n-39999" {
		t.Fatalf("the last 10 changes: %d of them (ok %v)", len(chs), ok)
	}
}

// startSynced starts c's informers until the test ends and waits for their
// first sync.
func startSynced(t *testing.T, c *kube.Cluster) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	t.Cleanup(func() { cancel(); c.Shutdown() })
	if !c.WaitForSync(ctx) {
		t.Fatal("no sync")
	}
}
