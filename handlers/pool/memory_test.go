package pool

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// tenThousandSlots is a pool file of 10,000 slots in 100 groups, each with
// an address, a label and a capacity: serve's benchmark pool.
func tenThousandSlots() []byte {
	var w strings.Builder
	w.WriteString("groups:\n")
	for g := range 100 {
		fmt.Fprintf(&w, "  - name: g%d\n", g)
	}
	w.WriteString("slots:\n")
	for s := range 10_000 {
		fmt.Fprintf(&w, "  - {name: node-%d.lan, group: g%d, address: 10.0.%d.%d, labels: {example.com/rack: r%d}, capacity: {cpu: \"8\", memory: 32Gi}}\n",
			s, s%100, s/256, s%256, s%10)
	}
	return []byte(w.String())
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// A parsed pool file is held for as long as serve runs (it is reconciled
// again, and its problems found then are reported at their lines). What
// it holds is the decoded slots and the lines of the file, not the parsed
// document the checks walked: at 10,000 slots, under 24 MiB.
func TestParsedPoolHoldsNoDocument(t *testing.T) {
	data := tenThousandSlots()
	before := liveHeap()
	cfg, err := Parse("pool.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	after := liveHeap()
	runtime.KeepAlive(cfg)
	held := after - min(before, after)
	t.Logf("a parsed pool of %d slots holds %.1f MiB", len(cfg.Slots), float64(held)/(1<<20))
	if held > 24<<20 {
		t.Errorf("a parsed pool of 10,000 slots holds %.1f MiB, want under 24 MiB", float64(held)/(1<<20))
	}
}
