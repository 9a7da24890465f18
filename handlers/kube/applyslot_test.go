package kube_test

import (
	"context"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
)

// A host that already carries its slot's labels and taints is left alone
// without building a patch: the host reactors ask at every pass of a
// ready slot. One that misses a label or a taint still gets it.
func TestApplySlotConfigOnAConfiguredHostBuildsNothing(t *testing.T) {
	f, c := start(t)
	ctx := context.Background()
	if err := f.RegisterNode(ctx, "a.lan", "homelab://a.lan", nil, time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	labels := map[string]string{"rack": "b", "zone": "z1"}
	taints := []events.Taint{{Key: "slow", Effect: "PreferNoSchedule"}}
	if err := c.ApplySlotConfig(ctx, "a.lan", labels, taints); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	gen := f.Generation()
	allocs := testing.AllocsPerRun(100, func() {
		if err := c.ApplySlotConfig(ctx, "a.lan", labels, taints); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || f.Generation() != gen {
		t.Fatalf("applying the config a host has: %.0f allocations, %d writes; want none", allocs, f.Generation()-gen)
	}
	labels["zone"] = "z2"
	taints = append(taints, events.Taint{Key: "gpu", Value: "yes", Effect: "NoSchedule"})
	if err := c.ApplySlotConfig(ctx, "a.lan", labels, taints); err != nil {
		t.Fatal(err)
	}
	_ = c.Settle(ctx)
	n, _ := c.Node("a.lan")
	if n.Labels["zone"] != "z2" || n.Labels["rack"] != "b" || len(n.Taints) != 2 || !n.HasTaint(events.Taint{Key: "gpu", Effect: "NoSchedule"}) {
		t.Fatalf("node %+v", n)
	}
}
