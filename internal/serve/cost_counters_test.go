package serve

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
)

// serve without the REST API still keeps the cost index: the cost counters
// take their figures from it, so they count the simulator's machines.
func TestCostCountersWithoutTheRESTAPI(t *testing.T) {
	metrics := freeAddr(t)
	o := serveOptions{
		config: examplePool, configPoll: time.Hour,
		dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		metricsAddress: metrics,
		cluster:        clusterOptions{scenario: filepath.Join("..", "..", "deploy", "examples", "scenario.yaml"), speed: 60},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	prefix := `claimstream_cost_total{currency="EUR",group="homelab"} `
	eventstest.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		resp, err := http.Get("http://" + metrics + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		i := strings.Index(string(body), prefix)
		if i < 0 {
			return fmt.Errorf("metrics lack %q", prefix)
		}
		line, _, _ := strings.Cut(string(body[i+len(prefix):]), "\n")
		if v, err := strconv.ParseFloat(line, 64); err != nil || v <= 0 {
			return fmt.Errorf("%s%s, want above 0", prefix, line)
		}
		return nil
	})
}
