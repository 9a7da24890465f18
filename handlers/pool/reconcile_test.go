package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/schemas"
)

var t0 = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

// pool is the log and the views of a test: writes are checked against the
// aggregates' last sequences as a store would, then folded with Evolve.
type pool struct {
	t    *testing.T
	s    *projections.State
	seq  uint64
	last map[events.Aggregate]uint64
}

func newPool(t *testing.T) *pool {
	return &pool{t: t, s: projections.NewState(), last: map[events.Aggregate]uint64{}}
}

func (p *pool) apply(ws []events.Write) {
	p.t.Helper()
	for _, w := range ws {
		if w.Expected != p.last[w.Aggregate] {
			p.t.Fatalf("write to %s expects seq %d, the log has %d", w.Aggregate, w.Expected, p.last[w.Aggregate])
		}
		for _, ev := range w.Events {
			p.seq++
			ev.Seq = p.seq
			ev.Aggregate = w.Aggregate
			ev.Type = ev.Data.EventType()
			if got := events.AggregateOf(ev.Data); got != w.Aggregate {
				p.t.Fatalf("%s event in a write to %s", got, w.Aggregate)
			}
			raw, err := json.Marshal(ev.Data)
			if err != nil {
				p.t.Fatal(err)
			}
			if err := schemas.ValidateEvent(string(ev.Type), raw); err != nil {
				p.t.Errorf("%s does not match its schema: %v", ev.Type, err)
			}
			if err := projections.Evolve(p.s, ev); err != nil {
				p.t.Fatalf("evolve %s: %v", ev.Type, err)
			}
			p.last[w.Aggregate] = ev.Seq
		}
	}
}

// reconcile parses src and applies what Reconcile returns.
func (p *pool) reconcile(src string) []events.Write {
	p.t.Helper()
	cfg, err := Parse("pool.yaml", []byte(src))
	if err != nil {
		p.t.Fatalf("parse: %v", err)
	}
	ws, err := Reconcile(cfg, p.s, t0)
	if err != nil {
		p.t.Fatalf("reconcile: %v", err)
	}
	p.apply(ws)
	return ws
}

// claim creates a live (pending) claim on slot.
func (p *pool) claim(name, slot string) {
	p.t.Helper()
	sl := p.s.Slots[slot]
	g := p.s.Groups[sl.Group]
	p.apply([]events.Write{{
		Aggregate: events.SlotAggregate(slot),
		Expected:  sl.Seq,
		Events: []events.Event{{Time: t0, Data: events.ClaimCreated{
			Ref:         events.Ref{Claim: name, Slot: slot, Group: sl.Group, Attempt: 1, Cause: "IncreaseSize(+1) by test"},
			RequestedAt: t0, RequestedBy: "test",
			Request:    events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: sl.Group},
			DeadlineAt: projections.DeadlineAt(t0, g.Spec),
			Budget:     events.Duration(projections.DefaultBudget),
			TTL:        events.Duration(projections.ClaimTTL(g.Spec)),
		}}},
	}})
}

// summary lists writes as "aggregate@expected: Type Type".
func summary(ws []events.Write) []string {
	var out []string
	for _, w := range ws {
		var types []string
		for _, e := range w.Events {
			types = append(types, string(e.Data.EventType()))
		}
		out = append(out, fmt.Sprintf("%s@%d: %s", w.Aggregate, w.Expected, strings.Join(types, " ")))
	}
	return out
}

const base = `
groups:
  - name: homelab
    maxNodeProvisionTime: 15m
  - name: burst
    scaler: builtin
    builtin: {maxNodes: 2}
slots:
  - name: node-1.lan
    group: homelab
    startup:
      podSpec:
        containers: [{name: wake, image: busybox, command: [/scripts/wake.sh]}]
  - name: node-2.lan
    group: homelab
  - name: node-3.lan
    group: homelab
  - name: burst-1
    group: burst
  - name: burst-2
    group: burst
`

func edit(src string, pairs ...string) string {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(src, pairs[i]) {
			panic("edit: no " + pairs[i])
		}
		src = strings.Replace(src, pairs[i], pairs[i+1], 1)
	}
	return src
}

func TestReconcile(t *testing.T) {
	withoutNode3 := edit(base, "  - name: node-3.lan\n    group: homelab\n", "")
	node3InBurst := edit(base, "  - name: node-3.lan\n    group: homelab\n", "  - name: node-3.lan\n    group: burst\n")

	cases := []struct {
		name string
		// setup runs on a pool that has applied base.
		setup func(p *pool)
		src   string
		want  []string
		check func(t *testing.T, p *pool, ws []events.Write)
	}{
		{
			name: "same file twice writes nothing",
			src:  base,
		},
		{
			name: "a group spec change is one GroupChanged",
			src:  edit(base, "maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 20m"),
			want: []string{"group/homelab@1: GroupChanged"},
			check: func(t *testing.T, p *pool, ws []events.Write) {
				if got := p.s.Groups["homelab"].Spec.MaxNodeProvisionTime; got.D() != 20*time.Minute {
					t.Errorf("maxNodeProvisionTime = %s", got)
				}
			},
		},
		{
			name: "a slot spec change is one SlotChanged",
			src:  edit(base, "[/scripts/wake.sh]", "[/scripts/wake.sh, --fast]"),
			want: []string{"slot/node-1.lan@3: SlotChanged"},
		},
		{
			name: "a removed slot is retired",
			src:  withoutNode3,
			want: []string{"slot/node-3.lan@5: SlotRetired"},
			check: func(t *testing.T, p *pool, ws []events.Write) {
				if !p.s.Slots["node-3.lan"].Retired {
					t.Error("node-3.lan not retired")
				}
				if got := p.s.Groups["homelab"].Slots; !reflect.DeepEqual(got, []string{"node-1.lan", "node-2.lan"}) {
					t.Errorf("homelab slots %v", got)
				}
			},
		},
		{
			name:  "a removed slot with a live claim fails the claim, then is retired",
			setup: func(p *pool) { p.claim("c-1", "node-3.lan") },
			src:   withoutNode3,
			want:  []string{"slot/node-3.lan@8: ClaimFailed SlotRetired"},
			check: func(t *testing.T, p *pool, ws []events.Write) {
				f := ws[0].Events[0].Data.(events.ClaimFailed)
				wantRef := events.Ref{Claim: "c-1", Slot: "node-3.lan", Group: "homelab", Attempt: 1, Cause: "pool config pool.yaml"}
				if f.Ref != wantRef || f.Reason != projections.ReasonSlotDeleted || !f.ForceShutdown {
					t.Errorf("ClaimFailed %+v", f)
				}
				c := p.s.Claims["c-1"]
				if c.Phase != projections.PhaseFailed || c.Reason != projections.ReasonSlotDeleted || !c.ForceShutdown {
					t.Errorf("claim after fold: %+v", c)
				}
				if p.s.LiveOfSlot("node-3.lan") != nil || !p.s.Slots["node-3.lan"].Retired {
					t.Error("slot still live or not retired")
				}
				if got := p.s.TargetSize("homelab"); got != 0 {
					t.Errorf("target size %d", got)
				}
			},
		},
		{
			name: "a slot moved without a live claim is one SlotChanged",
			src:  node3InBurst,
			want: []string{"slot/node-3.lan@5: SlotChanged"},
			check: func(t *testing.T, p *pool, ws []events.Write) {
				if got := ws[0].Events[0].Data.Reference().Group; got != "burst" {
					t.Errorf("SlotChanged names group %q", got)
				}
				if p.s.Slots["node-3.lan"].Group != "burst" ||
					!reflect.DeepEqual(p.s.Groups["burst"].Slots, []string{"burst-1", "burst-2", "node-3.lan"}) ||
					!reflect.DeepEqual(p.s.Groups["homelab"].Slots, []string{"node-1.lan", "node-2.lan"}) {
					t.Errorf("views after move: slot %+v, burst %v, homelab %v", p.s.Slots["node-3.lan"], p.s.Groups["burst"].Slots, p.s.Groups["homelab"].Slots)
				}
			},
		},
		{
			name: "a removed group is retired after its slots",
			src: edit(base,
				"  - name: burst\n    scaler: builtin\n    builtin: {maxNodes: 2}\n", "",
				"  - name: burst-1\n    group: burst\n  - name: burst-2\n    group: burst\n", ""),
			want: []string{"slot/burst-1@6: SlotRetired", "slot/burst-2@7: SlotRetired", "group/burst@2: GroupRetired"},
			check: func(t *testing.T, p *pool, ws []events.Write) {
				if !p.s.Groups["burst"].Retired {
					t.Error("burst not retired")
				}
			},
		},
		{
			name:  "new groups come before slot events, retirements before declarations",
			setup: func(p *pool) {},
			src: edit(withoutNode3,
				"slots:\n", "  - name: gpu\nslots:\n  - name: gpu-1.lan\n    group: gpu\n"),
			want: []string{"group/gpu@0: GroupDeclared", "slot/node-3.lan@5: SlotRetired", "slot/gpu-1.lan@0: SlotDeclared"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newPool(t)
			first := p.reconcile(base)
			wantFirst := []string{
				"group/homelab@0: GroupDeclared", "group/burst@0: GroupDeclared",
				"slot/node-1.lan@0: SlotDeclared", "slot/node-2.lan@0: SlotDeclared", "slot/node-3.lan@0: SlotDeclared",
				"slot/burst-1@0: SlotDeclared", "slot/burst-2@0: SlotDeclared",
			}
			if got := summary(first); !reflect.DeepEqual(got, wantFirst) {
				t.Fatalf("first apply:\n got %q\nwant %q", got, wantFirst)
			}
			if c.setup != nil {
				c.setup(p)
			}
			ws := p.reconcile(c.src)
			if got := summary(ws); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("writes:\n got %q\nwant %q", got, c.want)
			}
			if c.want == nil && ws != nil {
				t.Errorf("no change must return nil, got %#v", ws)
			}
			for _, w := range ws {
				for _, e := range w.Events {
					if !e.Time.Equal(t0) || e.Data.Reference().Cause != "pool config pool.yaml" {
						t.Errorf("event %s: time %s, cause %q", e.Data.EventType(), e.Time, e.Data.Reference().Cause)
					}
				}
			}
			if c.check != nil {
				c.check(t, p, ws)
			}
			if again := p.reconcile(c.src); again != nil {
				t.Errorf("re-applying the same file wrote %q", summary(again))
			}
		})
	}
}

// TestReconcileFirstApply: an empty pool gets every group and slot
// declared with the file's specs.
func TestReconcileFirstApply(t *testing.T) {
	cfg, err := Load("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := newPool(t)
	ws, err := Reconcile(cfg, p.s, t0)
	if err != nil {
		t.Fatal(err)
	}
	p.apply(ws)
	for _, g := range cfg.Groups {
		v, ok := p.s.ActiveGroup(g.Name)
		if !ok || !reflect.DeepEqual(v.Spec, g.Spec) {
			t.Errorf("group %s: %+v", g.Name, v)
		}
	}
	for _, sl := range cfg.Slots {
		v, ok := p.s.ActiveSlot(sl.Name)
		if !ok || v.Group != sl.Group || !reflect.DeepEqual(v.Spec, sl.Spec) {
			t.Errorf("slot %s: %+v", sl.Name, v)
		}
	}
	if got := p.s.Groups["empty"].Slots; len(got) != 0 {
		t.Errorf("empty group has slots %v", got)
	}
	if sl, ok := p.s.SlotForNode("", "ipmi://rack-a/node-2"); !ok || sl.Name != "node-2.lan" {
		t.Errorf("providerID index: %v %v", sl, ok)
	}
	if ws, err := Reconcile(cfg, p.s, t0.Add(time.Hour)); err != nil || ws != nil {
		t.Errorf("second apply: %q, %v", summary(ws), err)
	}
}

// TestReconcileRefusals: changes the views forbid are a *ConfigError and
// write nothing, not even the valid parts of the change.
func TestReconcileRefusals(t *testing.T) {
	p := newPool(t)
	p.reconcile(base)
	p.claim("c-7", "node-3.lan")
	before := p.s.Seq

	moved := edit(base,
		"  - name: node-3.lan\n    group: homelab\n", "  - name: node-3.lan\n    group: burst\n",
		"maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 30m")
	cfg, err := Parse("pool.yaml", []byte(moved))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := Reconcile(cfg, p.s, t0)
	want := "pool.yaml:17: slots[2].group: slot node-3.lan has live claim c-7: scale it down before moving it (from group homelab to burst)"
	var ce *ConfigError
	if !errors.As(err, &ce) || err.Error() != want {
		t.Fatalf("got %v, want\n%s", err, want)
	}
	if ws != nil {
		t.Errorf("a refused change returned writes %q", summary(ws))
	}

	repointed := edit(base, "  - name: node-3.lan\n    group: homelab\n", "  - name: node-3.lan\n    group: homelab\n    providerID: ipmi://node-3\n")
	cfg, err = Parse("pool.yaml", []byte(repointed))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Reconcile(cfg, p.s, t0)
	want = "pool.yaml:18: slots[2].providerID: slot node-3.lan has live claim c-7: scale it down before changing its providerID (from homelab://node-3.lan to ipmi://node-3)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want\n%s", err, want)
	}

	// A config that does not parse gives nothing to reconcile.
	if cfg, err := Parse("pool.yaml", []byte(edit(base, "maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 15 minutes"))); err == nil || cfg != nil {
		t.Errorf("invalid config parsed: %v", err)
	}
	if _, err := Reconcile(nil, p.s, t0); err == nil {
		t.Error("Reconcile(nil) succeeded")
	}
	// A hand-built config naming an undeclared group is refused too.
	hand := &Config{Source: "api", Slots: []Slot{{Name: "x", Group: "nowhere", Spec: events.SlotSpec{ProviderID: "homelab://x"}}}}
	if _, err := Reconcile(hand, p.s, t0); err == nil || err.Error() != `api: slots[0].group: group "nowhere" is not declared` {
		t.Errorf("hand-built config: %v", err)
	}
	if p.s.Seq != before {
		t.Errorf("views moved from seq %d to %d", before, p.s.Seq)
	}
	// Once the claim is over, the move goes through.
	p.apply([]events.Write{{Aggregate: events.SlotAggregate("node-3.lan"), Expected: p.s.Slots["node-3.lan"].Seq,
		Events: []events.Event{{Time: t0, Data: events.ClaimCancelled{
			Ref: events.Ref{Claim: "c-7", Slot: "node-3.lan", Group: "homelab", Attempt: 1, Cause: "test"}, Reason: "test"}}}}})
	ws = p.reconcile(moved)
	if got, want := summary(ws), []string{"group/homelab@1: GroupChanged", "slot/node-3.lan@9: SlotChanged"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the claim ended:\n got %q\nwant %q", got, want)
	}
}

// TestReconcileRetiredComesBack: a retired group or slot declared again is
// declared with the expectation of its last event.
func TestReconcileRetiredComesBack(t *testing.T) {
	p := newPool(t)
	p.reconcile(base)
	p.reconcile("groups: []\n")
	for _, name := range []string{"homelab", "burst"} {
		if !p.s.Groups[name].Retired {
			t.Errorf("group %s not retired", name)
		}
	}
	// Log so far: 7 declarations (seq 1-7), then slots retired in name
	// order (burst-1 8, burst-2 9, node-1.lan 10, node-2.lan 11,
	// node-3.lan 12), then the groups (burst 13, homelab 14).
	ws := p.reconcile(base)
	want := []string{
		"group/homelab@14: GroupDeclared", "group/burst@13: GroupDeclared",
		"slot/node-1.lan@10: SlotDeclared", "slot/node-2.lan@11: SlotDeclared", "slot/node-3.lan@12: SlotDeclared",
		"slot/burst-1@8: SlotDeclared", "slot/burst-2@9: SlotDeclared",
	}
	if got := summary(ws); !reflect.DeepEqual(got, want) {
		t.Errorf("writes:\n got %q\nwant %q", got, want)
	}
	if g, ok := p.s.ActiveGroup("homelab"); !ok || !reflect.DeepEqual(g.Slots, []string{"node-1.lan", "node-2.lan", "node-3.lan"}) {
		t.Errorf("homelab after coming back: %+v", g)
	}
}
