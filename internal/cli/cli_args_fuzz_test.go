package cli

import (
	"slices"
	"strings"
	"testing"
)

// FuzzKindAndNames: any arguments of get or describe either are refused
// with an error, or name one kind and names without a kind prefix, one per
// argument after the kind (KIND NAME...) or one per argument (KIND/NAME...).
func FuzzKindAndNames(f *testing.F) {
	for _, s := range []string{"slots", "slot node-1.lan", "slot/node-1.lan slot/b", "slot/a claim/b", "slots slot/a", "group/", "/x", "ng/homelab", "claim/a/b", "pod/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 {
			return
		}
		kind, names, err := kindAndNames(args)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if !slices.Contains([]string{"groups", "slots", "claims"}, kind) {
			t.Fatalf("%q: kind %q", args, kind)
		}
		if strings.Contains(args[0], "/") {
			if len(names) != len(args) {
				t.Fatalf("%q: %d names", args, len(names))
			}
			for i, n := range names {
				if n == "" || !strings.HasSuffix(args[i], "/"+n) {
					t.Fatalf("%q: name %q of %q", args, n, args[i])
				}
			}
		} else if !slices.Equal(names, args[1:]) {
			t.Fatalf("%q: names %q", args, names)
		}
	})
}
