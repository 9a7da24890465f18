// Command testenv builds (or finds in the cache) the e2e control-plane
// binaries and prints their paths. CI may run it first to pre-warm the cache:
//
//	cd deploy/e2e && go run ./cmd/testenv
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

func main() {
	start := time.Now()
	b, err := testenv.EnsureBinaries(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("etcd=%s\nkube-apiserver=%s\nkube-controller-manager=%s\nkube-scheduler=%s\nkwok=%s\n(%s)\n",
		b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler, b.Kwok, time.Since(start).Round(time.Second))
}
