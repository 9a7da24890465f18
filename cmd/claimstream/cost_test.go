package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections/cost"
)

// serve in the simulator, playing the example scenario on the example
// pool: `claimstream cost` shows machine-hours, energy and money for every
// group, and the cost counters are on the metrics endpoint.
func TestCostInTheSimulator(t *testing.T) {
	apiAddr, metricsAddr := freeAddr(t), freeAddr(t)
	o := serveOptions{
		config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour,
		dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		apiAddress: apiAddr, metricsAddress: metricsAddr,
		cluster: clusterOptions{scenario: filepath.Join("..", "..", "deploy", "examples", "scenario.yaml"), speed: 60},
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

	var token string
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := os.ReadFile(filepath.Join(o.dataDir, apiTokenFile))
		token = strings.TrimSpace(string(b))
		return err
	})
	costCLI := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRoot()
		root.SetOut(&out)
		root.SetArgs(append([]string{"cost", "--server", "http://" + apiAddr, "--token", token, "--cli-config", ""}, args...))
		err := root.Execute()
		return out.String(), err
	}
	var rep cost.Report
	eventstest.CheckFor(t, 60*time.Second, 200*time.Millisecond, func() error {
		out, err := costCLI("--since", "1d", "-o", "json")
		if err != nil {
			return err
		}
		rep = cost.Report{}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		for _, g := range []string{"homelab", "burst"} {
			i := findRow(rep, g)
			if i < 0 {
				return fmt.Errorf("no row for group %s: %+v", g, rep.Rows)
			}
			r := rep.Rows[i]
			if r.MachineHours <= 0 || r.Cost <= 0 || r.Boots == 0 || r.Currency != "EUR" {
				return fmt.Errorf("group %s: %+v, want machine-hours, cost and boots", g, r)
			}
		}
		if i := findRow(rep, "homelab"); rep.Rows[i].KWh <= 0 {
			return fmt.Errorf("homelab drew no energy: %+v", rep.Rows[i])
		}
		return nil
	})
	// The table names every group with its currency.
	table, err := costCLI("--since", "1d", "--by", "group")
	if err != nil || !strings.Contains(table, "homelab") || !strings.Contains(table, "burst") || !strings.Contains(table, "EUR") {
		t.Fatalf("cost table: %v\n%s", err, table)
	}
	if _, err := costCLI("--by", "team"); err == nil || !strings.Contains(err.Error(), "group, slot, requester, claim") {
		t.Fatalf("--by team: %v", err)
	}

	// The counters: each group's cost is above 0.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, g := range []string{"homelab", "burst"} {
		prefix := `claimstream_cost_total{currency="EUR",group="` + g + `"} `
		i := strings.Index(string(body), prefix)
		if i < 0 || strings.HasPrefix(string(body[i+len(prefix):]), "0\n") {
			t.Errorf("metrics: no non-zero %s", prefix)
		}
	}
}

func findRow(rep cost.Report, key string) int {
	for i, r := range rep.Rows {
		if r.Key == key {
			return i
		}
	}
	return -1
}
