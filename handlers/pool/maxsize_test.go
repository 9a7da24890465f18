package pool

import (
	"errors"
	"reflect"
	"testing"
)

// TestReconcileRefusesMaxSizeBelowLiveClaims: a pool file that lowers a
// group's maxSize below its live claims is refused, naming the group, the
// live count and the new maxSize, and writes nothing; a maxSize that holds
// them, or a change that also retires the slot of a claim, goes through.
func TestReconcileRefusesMaxSizeBelowLiveClaims(t *testing.T) {
	p := newPool(t)
	p.reconcile(base)
	p.claim("c-1", "node-1.lan")
	p.claim("c-2", "node-2.lan")
	before := p.s.Seq

	lowered := edit(base, "maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 15m\n    maxSize: 1")
	cfg, err := Parse("pool.yaml", []byte(lowered))
	if err != nil {
		t.Fatal(err)
	}
	want := "pool.yaml:5: groups[0].maxSize: group homelab has 2 live claims, more than the new maxSize 1: scale it down to 1 first (DecreaseTargetSize, DeleteNodes or deleting claims), then lower maxSize"
	for name, decide := range map[string]func() error{
		"Reconcile":      func() error { _, err := Reconcile(cfg, p.s, t0); return err },
		"ReconcileGroup": func() error { _, err := ReconcileGroup(cfg, p.s, "homelab", t0); return err },
		"GroupCommand":   func() error { _, err := GroupCommand{Config: cfg, Group: "homelab"}.Decide(p.s, t0); return err },
	} {
		err := decide()
		var ce *ConfigError
		if !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("%s: got %v, want\n%s", name, err, want)
		}
	}
	if p.s.Seq != before {
		t.Fatalf("views moved from seq %d to %d", before, p.s.Seq)
	}

	// maxSize 2 holds both claims.
	ws := p.reconcile(edit(base, "maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 15m\n    maxSize: 2"))
	if got, want := summary(ws), []string{"group/homelab@1: GroupChanged"}; !reflect.DeepEqual(got, want) {
		t.Errorf("maxSize 2: %q, want %q", got, want)
	}
	// maxSize 1 while node-2.lan leaves the file: its claim fails in the
	// same decision, one live claim stays.
	ws = p.reconcile(edit(lowered, "  - name: node-2.lan\n    group: homelab\n", ""))
	if got, want := summary(ws), []string{"group/homelab@10: GroupChanged", "slot/node-2.lan@9: ClaimFailed SlotRetired"}; !reflect.DeepEqual(got, want) {
		t.Errorf("maxSize 1 with node-2.lan retired:\n got %q\nwant %q", got, want)
	}
	if got := p.s.LiveInService("homelab"); got != 1 || p.s.MaxSize("homelab") != 1 {
		t.Errorf("live %d, maxSize %d", got, p.s.MaxSize("homelab"))
	}
}

// TestReconcileGroupOrder: one group's writes come retirements first, then
// the group, then its slots; a group leaving the file is retired after its
// slots; a slot moving in is changed under the group it moves to.
func TestReconcileGroupOrder(t *testing.T) {
	p := newPool(t)
	p.reconcile(base)
	changed := edit(base,
		"maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 20m",
		"  - name: node-1.lan\n", "  - name: node-9.lan\n",
		"  - name: burst-1\n    group: burst\n", "  - name: burst-1\n    group: homelab\n",
		"builtin: {maxNodes: 2}", "builtin: {maxNodes: 1}")
	cfg, err := Parse("pool.yaml", []byte(changed))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := ReconcileGroup(cfg, p.s, "homelab", t0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"slot/node-1.lan@3: SlotRetired", "group/homelab@1: GroupChanged",
		"slot/node-9.lan@0: SlotDeclared", "slot/burst-1@6: SlotChanged",
	}
	if got := summary(ws); !reflect.DeepEqual(got, want) {
		t.Errorf("homelab:\n got %q\nwant %q", got, want)
	}
	ws, err = ReconcileGroup(cfg, p.s, "burst", t0)
	if got, want := summary(ws), []string{"group/burst@2: GroupChanged"}; err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("burst: %q %v, want %q", got, err, want)
	}

	gone := edit(base, "  - name: burst\n    scaler: builtin\n    builtin: {maxNodes: 2}\n", "",
		"  - name: burst-1\n    group: burst\n  - name: burst-2\n    group: burst\n", "")
	cfg, err = Parse("pool.yaml", []byte(gone))
	if err != nil {
		t.Fatal(err)
	}
	ws, err = ReconcileGroup(cfg, p.s, "burst", t0)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"slot/burst-1@6: SlotRetired", "slot/burst-2@7: SlotRetired", "group/burst@2: GroupRetired"}
	if got := summary(ws); !reflect.DeepEqual(got, want) {
		t.Errorf("burst leaving:\n got %q\nwant %q", got, want)
	}
}
