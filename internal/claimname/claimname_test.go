package claimname

import (
	"fmt"
	"strings"
	"testing"
)

// Names hold every name as it was appended, packed or not, through drops.
func TestNamesHoldWhatWasAppended(t *testing.T) {
	long := strings.Repeat("rack-7.", 8) + "lan" // cut to 40, then trimmed
	for _, slot := range []string{"node-1.lan", long, "a"} {
		var n Names
		var want []string
		for i := range 40 {
			var name string
			switch i % 5 {
			case 0:
				name = fmt.Sprintf("%s-manual-%d", slot, i) // not the rule's
			case 1:
				name = Base(slot) + "-ABCDEF" // upper case: not the rule's
			default:
				name = Of(slot, uint32(i*0x10101))
			}
			n.Append(slot, name)
			want = append(want, name)
			if i == 25 {
				n.DropFirst(7)
				want = want[7:]
			}
		}
		if n.Len() != len(want) {
			t.Fatalf("%s: %d names, want %d", slot, n.Len(), len(want))
		}
		for i, w := range want {
			if got := n.At(slot, i); got != w {
				t.Fatalf("%s: name %d is %q, want %q", slot, i, got, w)
			}
			if got := string(n.AppendAt([]byte("x"), slot, i)); got != "x"+w {
				t.Fatalf("%s: AppendAt %d is %q", slot, i, got)
			}
			if !n.Is(slot, i, w) || n.Is(slot, i, w+"0") {
				t.Fatalf("%s: Is %d wrong for %q", slot, i, w)
			}
		}
		if got := len(n.others); got != 12 {
			t.Fatalf("%s: %d names held as strings, want the 12 kept that the rule did not make", slot, got)
		}
	}
}

func TestPackIsTheRule(t *testing.T) {
	for _, c := range []struct {
		slot, claim string
		ok          bool
	}{
		{"node-1.lan", "node-1.lan-0a1b2c", true},
		{"node-1.lan", "node-1.lan-0a1b2", false},
		{"node-1.lan", "node-1.lan-0a1b2g", false},
		{"node-1.lan", "node-2.lan-0a1b2c", false},
		{"node-1.lan", "node-1.lanx0a1b2c", false},
		{strings.Repeat("a", 39) + ".x", strings.Repeat("a", 39) + "-000000", true},
	} {
		v, ok := Pack(c.slot, c.claim)
		if ok != c.ok || (ok && Of(c.slot, v) != c.claim) {
			t.Errorf("Pack(%q, %q) = %x, %v; want ok %v", c.slot, c.claim, v, ok, c.ok)
		}
	}
}
