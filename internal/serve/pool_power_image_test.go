package serve

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A pool whose slots use power drivers loads against a real cluster only
// with --power-image: without it the file is refused with the slots, the
// driver and the flag named (at start, or at a reload, which then keeps the
// pool applied before). The simulator needs no image; a pool without power
// drivers none either.
func TestPoolWithPowerDriversNeedsThePowerImage(t *testing.T) {
	const withPower = "../../deploy/examples/pool.yaml"
	real := clusterOptions{kubeconfig: "/etc/kubeconfig-of-a-real-cluster"}

	_, err := poolLoader(real)(withPower)
	if err == nil {
		t.Fatal("a pool with power drivers loaded for a real cluster without --power-image")
	}
	for _, want := range []string{"pool.yaml", "2 slot(s)", "node-2.lan", "ipmi", "--power-image"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}

	withImage := real
	withImage.powerImage = "ghcr.io/claimstream/claimstream:v1"
	if _, err := poolLoader(withImage)(withPower); err != nil {
		t.Errorf("with --power-image: %v", err)
	}
	if _, err := poolLoader(clusterOptions{})(withPower); err != nil {
		t.Errorf("on the simulator: %v", err)
	}
	plain := filepath.Join(t.TempDir(), "pool.yaml")
	if err := os.WriteFile(plain, []byte("groups:\n  - name: rack\n    maxSize: 1\nslots:\n  - {name: n-1, group: rack}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := poolLoader(real)(plain); err != nil {
		t.Errorf("a pool without power drivers: %v", err)
	}
}
