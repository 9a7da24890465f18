package chartrender

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// budgetConstant reads one duration constant of projections/constants.go
// ("DefaultJobTimeout = 5 * time.Minute", "BudgetMargin = time.Minute"): this module does not link
// claimstream's packages, and the figures must be serve's own.
func budgetConstant(t *testing.T, src, name string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(`(?m)^\s*` + name + `\s*=\s*(?:([0-9]+)\s*\*\s*)?time\.(Second|Minute|Hour)\s*$`).FindStringSubmatch(src)
	if m == nil {
		t.Fatalf("projections/constants.go: no %s = N * time.Unit", name)
	}
	n := 1
	if m[1] != "" {
		n, _ = strconv.Atoi(m[1])
	}
	unit := map[string]time.Duration{"Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}[m[2]]
	return time.Duration(n) * unit
}

// The chart's cluster-autoscaler must wait at least as long as a claim may
// take from created to ready, else it gives up on a machine claimstream is
// still booting. The budgets come from projections, so the template's
// arithmetic cannot drift from serve's.
func TestMaxNodeProvisionTimeCoversTheBootBudget(t *testing.T) {
	src := repoFile(t, "projections/constants.go")
	if !strings.Contains(src, `{"JobTimeout", t.JobTimeout},
		{"JobMonitorPollInterval", JobMonitorPollInterval},
		{"RegistrationWait", t.RegistrationWait},
		{"ReadinessGateTimeout", t.ReadinessGate},
		{"MaxUncordonRetryInterval", MaxUncordonRetryInterval},
		{"BudgetMargin", BudgetMargin},`) {
		t.Fatal("projections.Timeouts.BudgetConstants has other members than the chart's check sums")
	}
	fixed := budgetConstant(t, src, "JobMonitorPollInterval") + budgetConstant(t, src, "MaxUncordonRetryInterval") + budgetConstant(t, src, "BudgetMargin")
	lifecycle := budgetConstant(t, src, "DefaultRegistrationWait") + budgetConstant(t, src, "DefaultReadinessGateTimeout")
	def := (fixed + lifecycle + budgetConstant(t, src, "DefaultJobTimeout")).String()
	long := (fixed + lifecycle + 10*time.Minute).String()
	if def != "12m10s" {
		t.Logf("the default boot budget is %s; values.yaml and the docs say 12m10s", def)
	}
	for _, c := range []struct {
		name, doc string
		want      []string // empty: renders
	}{
		{"default values", "{}", nil},
		{"the chart's default with cluster-autoscaler", "{clusterAutoscaler: {enabled: true}}", nil},
		{"equal to the budget", "{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: " + def + "}}", nil},
		{"above the budget", "{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: 1h}}", nil},
		{"below the budget", "{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: 12m}}",
			[]string{"clusterAutoscaler.maxNodeProvisionTime (12m) is below the boot budget of group \"homelab\" (" + def + ":", "at least " + def}},
		{"below in seconds", "{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: 729s}}",
			[]string{"clusterAutoscaler.maxNodeProvisionTime (729s)", "(" + def + ":"}},
		{"a fraction below", "{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: 0.2h}}",
			[]string{"clusterAutoscaler.maxNodeProvisionTime (0.2h)"}},
		{"unchecked without the chart's cluster-autoscaler", "{clusterAutoscaler: {enabled: false, maxNodeProvisionTime: 1m}}", nil},
		{"a group's longer lifecycle", `{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: 15m},
			pool: {config: {groups: [{name: homelab, maxSize: 1, lifecycle: {startupJobTimeout: 10m}}]}}}`,
			[]string{"below the boot budget of group \"homelab\" (" + long + ":", "startupJobTimeout 10m0s", "at least " + long}},
		{"a group with its own provision time", `{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: 5m},
			pool: {config: {groups: [{name: homelab, maxSize: 1, maxNodeProvisionTime: 20m}]}}}`, nil},
		{"an existing pool ConfigMap: the default budget", "{clusterAutoscaler: {enabled: true, maxNodeProvisionTime: 10m}, pool: {existingConfigMap: my-pool}}",
			[]string{"below the default boot budget (" + def + ":"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render("claimstream", "ns", values(t, c.doc))
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("rendered; want a refusal mentioning %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to mention %q", err, w)
				}
			}
		})
	}
}
