package pool

import (
	"os"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// FuzzApplyGroupByGroup: any pool file that parses, applied group by group
// (the decisions of GroupCommand until each writes nothing) over the base
// pool, reaches the state the whole file as one decision describes: every
// decision within the append limit, each landing in order (a slot never
// before its group), and the file applied again plans nothing.
func FuzzApplyGroupByGroup(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte(edit(base, "maxNodeProvisionTime: 15m", "maxNodeProvisionTime: 15m\n    maxSize: 2")))
	f.Add([]byte("groups: []\n"))
	f.Add([]byte(edit(base, "  - name: burst-1\n    group: burst\n", "  - name: burst-1\n    group: homelab\n", "builtin: {maxNodes: 2}", "builtin: {maxNodes: 1}")))
	if full, err := os.ReadFile("testdata/good/full.yaml"); err == nil {
		f.Add(full)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("pool.yaml", data)
		if err != nil {
			return
		}
		p := newPool(t)
		p.reconcile(base)
		p.claim("c-1", "node-1.lan")

		whole, wholeErr := Reconcile(cfg, p.s, t0)
		plan, planErr := reconcile(cfg, p.s, t0, "")
		if (wholeErr == nil) != (planErr == nil) {
			t.Fatalf("Reconcile: %v, the plan: %v", wholeErr, planErr)
		}
		if wholeErr != nil {
			// A refusal of the whole file is a refusal of some group.
			return
		}
		planned := 0
		for _, g := range plan.groups {
			planned += plan.eventsOf[g]
		}
		if n := countEvents(whole); n != planned {
			t.Fatalf("the whole file is %d events, the plan %d", n, planned)
		}
		wrote := 0
		for _, g := range plan.groups {
			for range planned + 1 {
				ws, err := GroupCommand{Config: cfg, Group: g}.Decide(p.s, t0)
				if err != nil {
					t.Fatalf("group %s: %v", g, err)
				}
				if ws == nil {
					break
				}
				if n := countEvents(ws); n > eventlog.MaxEventsPerAppend {
					t.Fatalf("group %s: a decision of %d events", g, n)
				}
				p.apply(ws)
				wrote += countEvents(ws)
			}
		}
		if wrote != planned {
			t.Errorf("group by group wrote %d events, the plan %d", wrote, planned)
		}
		if ws, err := Reconcile(cfg, p.s, t0); err != nil || ws != nil {
			t.Errorf("after the apply: %q, %v", summary(ws), err)
		}
	})
}

func countEvents(ws []events.Write) int {
	n := 0
	for _, w := range ws {
		n += len(w.Events)
	}
	return n
}
