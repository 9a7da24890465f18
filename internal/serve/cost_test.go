package serve

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	apiAddr, metricsAddr, token := exampleServe(t)
	costCLI := func(args ...string) (string, error) {
		out, _, err := cliAgainst(apiAddr, token, append([]string{"cost"}, args...)...)
		return out, err
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
