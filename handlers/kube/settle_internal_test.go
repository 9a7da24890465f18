package kube

import (
	"context"
	"testing"
	"time"
)

// Only a cluster with a truth to settle against records the versions its
// handlers saw: a cluster made by New (serve's) takes every change without
// keeping a copy of each object's version.
func TestOnlyASettlingClusterRecordsHandledVersions(t *testing.T) {
	f := NewFake()
	settling := f.NewCluster(Options{Namespace: "ns"})
	plain := New(f, Options{Namespace: "ns"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []*Cluster{settling, plain} {
		c.Start(ctx)
		defer c.Shutdown()
		if !c.WaitForSync(ctx) {
			t.Fatal("no sync")
		}
	}
	defer cancel() // ends the informers before the Shutdowns above run
	changed := plain.Changed()
	if err := f.RegisterNode(ctx, "n1", "", nil, time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	if err := settling.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the plain cluster was not told of the Node")
	}
	settling.settle.handled.mu.Lock()
	_, seen := settling.settle.handled.by["nodes"]["n1"]
	settling.settle.handled.mu.Unlock()
	if !seen {
		t.Error("the settling cluster did not record the Node its handlers saw")
	}
	if plain.settle != nil {
		t.Error("the cluster over no fake records the versions its handlers saw")
	}
}
