package serve

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestServeLinksOnlyTheClientsItCalls: the binary links client-go's typed
// clients (and their fakes, for the simulator) of the six API groups
// kube.Client names, not the whole clientset's fifty: with them the binary
// was 125 MB instead of 93, and the runtime's function tables, which every
// collection and stack walk reads, a third larger. A change that calls
// kubernetes.NewForConfig, the informer factory or the fake clientset
// again from serve's code fails here.
func TestServeLinksOnlyTheClientsItCalls(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the executable's ELF symbols")
	}
	bin := filepath.Join(t.TempDir(), "claimstream")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/claimstream/claimstream/cmd/claimstream").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"apps/v1", "batch/v1", "coordination/v1", "core/v1", "events/v1", "policy/v1"}
	const typed = "k8s.io/client-go/kubernetes/typed/"
	linked := map[string]bool{}
	for _, s := range syms {
		if strings.HasPrefix(s.Name, "k8s.io/client-go/informers.") || strings.HasPrefix(s.Name, "k8s.io/client-go/kubernetes.") {
			t.Errorf("the binary links %s (the informer factory or the whole clientset)", s.Name)
			continue
		}
		rest, ok := strings.CutPrefix(s.Name, typed)
		if !ok {
			continue
		}
		parts := strings.SplitN(rest, "/", 3)
		if len(parts) < 2 {
			continue
		}
		gv, _, _ := strings.Cut(parts[0]+"/"+parts[1], ".")
		linked[gv] = true
	}
	var extra []string
	for gv := range linked {
		if !slices.Contains(want, gv) {
			extra = append(extra, gv)
		}
	}
	slices.Sort(extra)
	if len(extra) > 0 {
		t.Errorf("the binary links the typed clients of %v, beyond kube.Client's %v", extra, want)
	}
	if !linked["core/v1"] || !linked["batch/v1"] {
		t.Errorf("no core/v1 or batch/v1 typed client among the symbols (%v): the check reads the wrong names", linked)
	}
}
