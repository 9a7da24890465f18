package pool

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with the file at path, or rewrites it under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func parseFile(t *testing.T, path string) (*Config, error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Name the file by its base name, so the goldens do not hold paths.
	return Parse(filepath.Base(path), data)
}

// TestBadFiles: every testdata/bad/<name>.yaml fails with exactly the text
// of <name>.err.
func TestBadFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/bad/*.yaml")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			cfg, err := parseFile(t, f)
			if err == nil {
				t.Fatalf("parsed without error: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("a failed parse returned a config")
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error is %T, want *ConfigError: %v", err, err)
			}
			for i := 1; i < len(ce.Problems); i++ {
				if ce.Problems[i].Line < ce.Problems[i-1].Line {
					t.Errorf("problems not in line order: %v", ce.Problems)
				}
			}
			for _, p := range ce.Problems {
				if p.Line <= 0 {
					t.Errorf("problem without a line: %+v", p)
				}
			}
			golden(t, strings.TrimSuffix(f, ".yaml")+".err", []byte(err.Error()+"\n"))
		})
	}
}

// TestGoodFiles: every testdata/good/<name>.yaml parses to the config of
// <name>.json, and parsing is deterministic.
func TestGoodFiles(t *testing.T) {
	files, _ := filepath.Glob("testdata/good/*.yaml")
	if len(files) == 0 {
		t.Fatal("no testdata/good/*.yaml")
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			cfg, err := parseFile(t, f)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, strings.TrimSuffix(f, ".yaml")+".json", append(got, '\n'))

			again, err := parseFile(t, f)
			if err != nil {
				t.Fatal(err)
			}
			again2, _ := json.MarshalIndent(again, "", "  ")
			if !bytes.Equal(got, again2) {
				t.Errorf("two parses of %s differ", f)
			}
		})
	}
}

// TestFullExample spells out what testdata/good/full.yaml must give:
// defaults applied, dotted names kept, quantities as text, canonical pod
// specs.
func TestFullExample(t *testing.T) {
	cfg, err := Load("testdata/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Source != "testdata/good/full.yaml" {
		t.Errorf("Source = %q", cfg.Source)
	}
	groups := map[string]Group{}
	var gnames []string
	for _, g := range cfg.Groups {
		groups[g.Name] = g
		gnames = append(gnames, g.Name)
	}
	if want := []string{"homelab", "burst.cloud", "empty"}; !reflect.DeepEqual(gnames, want) {
		t.Fatalf("groups %v, want %v (file order)", gnames, want)
	}
	var snames []string
	for _, s := range cfg.Slots {
		snames = append(snames, s.Name)
	}
	if want := []string{"node-1.lan", "node-2.lan", "node-3.lan", "burst-1", "burst-2"}; !reflect.DeepEqual(snames, want) {
		t.Fatalf("slots %v, want %v (file order)", snames, want)
	}

	threshold, gpuThreshold := 0.5, 0.6
	unneeded, unready := events.Duration(10*time.Minute), events.Duration(20*time.Minute)
	zeroOrMax, ignoreDS := false, true
	wantHomelab := events.GroupSpec{
		MinSize:              1,
		MaxSize:              3,
		MaxNodeProvisionTime: events.Duration(15 * time.Minute),
		ReadinessTaints:      []events.Taint{projections.DefaultReadinessTaint},
		Scaler:               events.ScalerClusterAutoscaler,
		ClaimTTL:             events.Duration(time.Hour),
		Lifecycle: events.Lifecycle{
			StartupJobTimeout: events.Duration(5 * time.Minute),
			RegistrationWait:  events.Duration(90 * time.Second),
			ReadinessGate:     events.Duration(4 * time.Minute),
		},
		Template: &events.NodeTemplate{
			Labels:      map[string]string{"node.kubernetes.io/instance-type": "homelab", "example.com/zone": "basement"},
			Annotations: map[string]string{"example.com/owner": "ops"},
			Taints:      []events.Taint{{Key: "example.com/homelab", Value: "yes", Effect: "PreferNoSchedule"}},
			Capacity:    map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110"},
			Allocatable: map[string]string{"cpu": "7500m", "memory": "30Gi", "pods": "110"},
			Pricing:     &events.Pricing{NodePerHour: 0.02, PodPerHour: 0.001},
		},
		Autoscaling: &events.AutoscalingOptions{
			ScaleDownUtilizationThreshold:    &threshold,
			ScaleDownGpuUtilizationThreshold: &gpuThreshold,
			ScaleDownUnneededTime:            &unneeded,
			ScaleDownUnreadyTime:             &unready,
			ZeroOrMaxNodeScaling:             &zeroOrMax,
			IgnoreDaemonSetsUtilization:      &ignoreDS,
		},
		GPULabel: "example.com/gpu",
	}
	if got := groups["homelab"].Spec; !reflect.DeepEqual(got, wantHomelab) {
		t.Errorf("homelab spec\n got %+v\nwant %+v", got, wantHomelab)
	}
	wantBurst := events.GroupSpec{
		ReadinessTaints: []events.Taint{},
		Scaler:          events.ScalerBuiltin,
		Builtin:         &events.BuiltinScaler{PodsPerNode: 8, MaxNodes: 2, Hold: events.Duration(2 * time.Minute)},
	}
	if got := groups["burst.cloud"].Spec; !reflect.DeepEqual(got, wantBurst) {
		t.Errorf("burst.cloud spec\n got %+v\nwant %+v", got, wantBurst)
	}
	if rt := groups["burst.cloud"].Spec.ReadinessTaints; rt == nil || len(rt) != 0 {
		t.Errorf("explicit readinessTaints: [] must stay an empty, non-nil list: %#v", rt)
	}
	if got := groups["empty"].Spec; got.Scaler != events.ScalerClusterAutoscaler || len(got.ReadinessTaints) != 1 {
		t.Errorf("empty group spec %+v", got)
	}

	s1 := cfg.Slots[0]
	if s1.Group != "homelab" || s1.Spec.ProviderID != "homelab://node-1.lan" || s1.Spec.Address != "192.0.2.10" {
		t.Errorf("node-1.lan: %+v", s1)
	}
	if s1.Line != 32 {
		t.Errorf("node-1.lan at line %d, want 32", s1.Line)
	}
	const wake = `{"containers":[{"name":"wake","image":"busybox:1.37","command":["/bin/sh","-c","/scripts/wake.sh node-1.lan"],"resources":{}}],"restartPolicy":"Never"}`
	if got := string(s1.Spec.Startup.PodSpec); got != wake {
		t.Errorf("startup pod spec\n got %s\nwant %s", got, wake)
	}
	if ttl := s1.Spec.Startup.TTLSecondsAfterFinished; ttl == nil || *ttl != 600 {
		t.Errorf("ttlSecondsAfterFinished = %v", ttl)
	}
	var halt corev1.PodSpec
	if err := json.Unmarshal(s1.Spec.Shutdown.PodSpec, &halt); err != nil {
		t.Fatal(err)
	}
	if halt.RestartPolicy != corev1.RestartPolicyOnFailure || halt.Containers[0].Name != "halt" {
		t.Errorf("shutdown pod spec %+v", halt)
	}
	if !reflect.DeepEqual(s1.Spec.Labels, map[string]string{"example.com/rack": "a"}) ||
		!reflect.DeepEqual(s1.Spec.Taints, []events.Taint{{Key: "example.com/slow", Effect: "NoSchedule"}}) ||
		!reflect.DeepEqual(s1.Spec.Capacity, map[string]string{"cpu": "8", "memory": "32Gi"}) {
		t.Errorf("node-1.lan labels/taints/capacity: %+v", s1.Spec)
	}

	s2 := cfg.Slots[1]
	if s2.Spec.ProviderID != "ipmi://rack-a/node-2" {
		t.Errorf("declared providerID lost: %q", s2.Spec.ProviderID)
	}
	if string(s2.Spec.Startup.PodSpec) != wake {
		t.Errorf("an aliased pod spec must give the same bytes: %s", s2.Spec.Startup.PodSpec)
	}
	s3 := cfg.Slots[2]
	if s3.Spec.ProviderID != "homelab://node-3.lan" || s3.Spec.Startup != nil || s3.Spec.Shutdown != nil {
		t.Errorf("node-3.lan: %+v", s3.Spec)
	}
}

// TestCanonicalPodSpec: the same pod spec written differently is stored
// as the same bytes.
func TestCanonicalPodSpec(t *testing.T) {
	a := `groups: [{name: g}]
slots:
  - name: s
    group: g
    startup:
      podSpec:
        restartPolicy: Never
        containers: [{name: c, image: busybox, command: [a, b], env: [{name: X, value: "1"}]}]
`
	b := `groups:
  - name: g
slots:
  - group: g
    name: s
    startup:
      podSpec:
        containers:
          - env:
              - value: "1"
                name: X
            command:
              - a
              - b
            image: busybox
            name: c
        restartPolicy: Never
`
	ca, err := Parse("a.yaml", []byte(a))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Parse("b.yaml", []byte(b))
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := ca.Slots[0].Spec.Startup.PodSpec, cb.Slots[0].Spec.Startup.PodSpec
	if !bytes.Equal(pa, pb) {
		t.Errorf("pod specs differ:\n%s\n%s", pa, pb)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, pa); err != nil || !bytes.Equal(compact.Bytes(), pa) {
		t.Errorf("pod spec is not compact JSON: %s", pa)
	}
}

// TestExamplePoolFile: the example shipped in deploy/ loads.
func TestExamplePoolFile(t *testing.T) {
	cfg, err := Load("../../deploy/examples/pool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, s := range cfg.Slots {
		count[s.Group]++
		if s.Spec.Startup == nil || s.Spec.Shutdown == nil {
			t.Errorf("example slot %s lacks a startup or shutdown spec", s.Name)
		}
	}
	scaler := map[string]string{}
	for _, g := range cfg.Groups {
		scaler[g.Name] = g.Spec.Scaler
	}
	want := map[string]string{"homelab": events.ScalerClusterAutoscaler, "burst": events.ScalerBuiltin}
	if !reflect.DeepEqual(scaler, want) || count["homelab"] != 3 || count["burst"] != 2 {
		t.Errorf("example: scalers %v, slots per group %v", scaler, count)
	}
	if _, err := Reconcile(cfg, projections.NewState(), time.Unix(0, 0)); err != nil {
		t.Errorf("example does not reconcile onto an empty pool: %v", err)
	}
}

// TestErrorFormat pins the error text's shape.
func TestErrorFormat(t *testing.T) {
	e := &ConfigError{Source: "pool.yaml", Problems: []Problem{
		{Line: 12, Path: "groups[0].minSize", Msg: "must be >= 0 (got -1)"},
		{Line: 3, Msg: "YAML syntax: did not find expected key"},
		{Path: "slots[0].group", Msg: "group \"x\" is not declared"},
	}}
	want := "pool.yaml:12: groups[0].minSize: must be >= 0 (got -1)\n" +
		"pool.yaml:3: YAML syntax: did not find expected key\n" +
		"pool.yaml: slots[0].group: group \"x\" is not declared"
	if got := e.Error(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := e.Problems[0].String(); got != "12: groups[0].minSize: must be >= 0 (got -1)" {
		t.Errorf("Problem.String() = %q", got)
	}
}

// TestParseEdgeCases covers the YAML corners: empty files, several
// documents, duplicate keys, merge keys, null values, label keys that are
// not identifiers.
func TestParseEdgeCases(t *testing.T) {
	cases := []struct {
		name, yaml, err string
	}{
		{"empty file", "", "x.yaml:1: groups: is required"},
		{"comment only", "# nothing\n", "x.yaml:1: groups: is required"},
		{"not a mapping", "- a\n", "x.yaml:1: the file is a list, not a pool file (a pool file is a map with groups and slots)"},
		{"empty pool", "groups: []\n", ""},
		{"two documents", "groups: []\n---\ngroups: []\n", "x.yaml:2: a pool file holds one YAML document; found a second one"},
		{"duplicate key", "groups: []\nslots: []\ngroups: []\n", "x.yaml:3: groups: duplicate key (first set at line 1)"},
		{"null is absent", "groups:\n  - name: g\n    maxSize:\n    readinessTaints: ~\nslots:\n", ""},
		{"merge key", "groups:\n  - &g {name: a, minSize: 0, maxSize: 0}\n  - <<: *g\n    name: b\n", ""},
		{"merge key keeps its errors", "groups:\n  - &g {name: a, minSize: -1}\n  - <<: *g\n    name: b\n",
			"x.yaml:2: groups[0].minSize: must be >= 0 (got -1)\nx.yaml:2: groups[1].minSize: must be >= 0 (got -1)"},
		{"unknown alias", "groups: *nope\n", "x.yaml:1: YAML syntax: an alias refers to an unknown anchor"},
		{"bad label key", "groups:\n  - name: g\n    template:\n      labels:\n        \"bad key/x/y\": v\n",
			`x.yaml:5: groups[0].template.labels["bad key/x/y"]: invalid label key: a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`},
		{"label value must be a string", "groups:\n  - name: g\n    template:\n      labels: {a: 1}\n",
			"x.yaml:4: groups[0].template.labels.a: must be a string (got 1)"},
		{"missing name", "groups:\n  - minSize: 0\n", "x.yaml:2: groups[0].name: is required"},
		{"no containers", "groups: [{name: g}]\nslots:\n  - name: s\n    group: g\n    startup:\n      podSpec: {restartPolicy: Never}\n",
			"x.yaml:6: slots[0].startup.podSpec.containers: at least one container is required"},
		{"restartPolicy Always", "groups: [{name: g}]\nslots:\n  - name: s\n    group: g\n    startup:\n      podSpec:\n        restartPolicy: Always\n        containers: [{name: c, image: busybox}]\n",
			`x.yaml:7: slots[0].startup.podSpec.restartPolicy: must be "Never" or "OnFailure" for a Job's pod (got "Always")`},
		{"container without image", "groups: [{name: g}]\nslots:\n  - name: s\n    group: g\n    shutdown:\n      podSpec:\n        containers:\n          - name: c\n",
			"x.yaml:8: slots[0].shutdown.podSpec.containers[0].image: is required"},
		{"podSpec case matters", "groups: [{name: g}]\nslots:\n  - name: s\n    group: g\n    shutdown:\n      podSpec:\n        Containers: [{name: c, image: busybox}]\n",
			"x.yaml:7: slots[0].shutdown.podSpec.Containers: unknown field (did you mean \"containers\"?)"},
		{"bad quantity inside podSpec", "groups: [{name: g}]\nslots:\n  - name: s\n    group: g\n    startup:\n      podSpec:\n        containers:\n          - name: c\n            image: busybox\n            resources: {limits: {memory: 1 GB}}\n",
			`x.yaml:10: slots[0].startup.podSpec.containers[0].resources.limits.memory: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' (got "1 GB")`},
		{"lifecycle zero", "groups:\n  - name: g\n    lifecycle: {startupJobTimeout: \"0\"}\n",
			`x.yaml:3: groups[0].lifecycle.startupJobTimeout: must be > 0 (got "0"); leave it out to take the default`},
		{"duplicate taint", "groups:\n  - name: g\n    readinessTaints:\n      - {key: a, effect: NoSchedule}\n      - {key: a, value: b, effect: NoSchedule}\n",
			"x.yaml:5: groups[0].readinessTaints[1]: duplicate taint a:NoSchedule (first at line 4)"},
		{"minSize above slots", "groups:\n  - name: g\n    minSize: 1\n",
			`x.yaml:3: groups[0].minSize: must be <= 0, the number of slots of group "g" (got 1)`},
		{"builtin maxNodes ignored for cluster-autoscaler", "groups:\n  - name: g\n    builtin: {maxNodes: 5}\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse("x.yaml", []byte(c.yaml))
			if c.err == "" {
				if err != nil {
					t.Fatalf("unexpected error:\n%v", err)
				}
				if cfg == nil {
					t.Fatal("nil config")
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want\n%s", c.err)
			}
			if err.Error() != c.err {
				t.Errorf("got\n%s\nwant\n%s", err, c.err)
			}
		})
	}
}

// TestAliasBomb: aliases that expand exponentially are cut off, not
// expanded.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups: []\n")
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 12; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("groups: []\n")
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "document too large") {
		t.Errorf("got %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

// TestAliasCycle: an alias inside the value it names is refused at its
// line, at once, with one problem, not one per expansion.
func TestAliasCycle(t *testing.T) {
	for _, doc := range []string{
		"groups: &a [*a, *a]\n",
		"groups:\n  - &g {name: a, more: [*g]}\n",
		"slots: &m\n  <<: *m\n",
	} {
		start := time.Now()
		_, err := Parse("x.yaml", []byte(doc))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("%q: got %v, want a *ConfigError", doc, err)
		}
		if len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0].Msg, "a cycle") {
			t.Errorf("%q: got %d problems, first %v; want one about a cycle", doc, len(ce.Problems), ce.Problems[0])
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%q: took %s", doc, d)
		}
	}
	_, err := Parse("x.yaml", []byte("groups: &a [*a, *a]\n"))
	if want := "x.yaml:1: YAML alias *a refers to the value that contains it (a cycle); aliases must name a value defined before and outside them"; err == nil || err.Error() != want {
		t.Errorf("got\n%v\nwant\n%s", err, want)
	}
}

// TestAliasBombLine: the bomb is refused at the line whose aliases cross
// the budget, before any expansion.
func TestAliasBombLine(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups: []\n")
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 40; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	start := time.Now()
	_, err := Parse("bomb.yaml", []byte(b.String()))
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("got %v, want one problem", err)
	}
	// a4 expands to 111,111 values; a5 (line 7) crosses 2^18 on its third alias.
	if p := ce.Problems[0]; p.Line != 7 || !strings.Contains(p.Msg, "alias bomb") {
		t.Errorf("got %v, want line 7 and an alias bomb", p)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
}

// TestErrorBounded: a file with hundreds of problems prints the first
// MaxShownProblems and a count of the rest.
func TestErrorBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("groups:\n")
	for i := 0; i < 120; i++ {
		fmt.Fprintf(&b, "  - {name: g%d, minSize: -1}\n", i)
	}
	_, err := Parse("x.yaml", []byte(b.String()))
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 120 {
		t.Fatalf("got %v, want 120 problems", err)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != MaxShownProblems+1 {
		t.Fatalf("got %d lines, want %d", len(lines), MaxShownProblems+1)
	}
	if got, want := lines[MaxShownProblems], "x.yaml: and 70 more problems not shown"; got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
}

// bigPool writes a pool of n slots in 100 groups, each slot with startup
// and shutdown pod specs of its own, or sharing one spec by alias.
func bigPool(n int, shared bool) string {
	var b strings.Builder
	b.WriteString("groups:\n")
	for g := range 100 {
		fmt.Fprintf(&b, "  - name: g%d\n", g)
	}
	b.WriteString("slots:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: s%d\n    group: g%d\n    address: 192.0.2.%d\n", i, i%100, i%250+1)
		for _, op := range []string{"startup", "shutdown"} {
			if shared && i > 0 {
				fmt.Fprintf(&b, "    %s: *%s\n", op, op)
				continue
			}
			anchor := ""
			if shared {
				anchor = " &" + op
			}
			fmt.Fprintf(&b, "    %s:%s\n      podSpec:\n        restartPolicy: Never\n        containers:\n          - name: power\n            image: busybox:1.37\n            command: [\"/bin/sh\", \"/scripts/%s.sh\"]\n            env:\n              - {name: TARGET_HOST, value: s%d}\n            volumeMounts:\n              - {name: scripts, mountPath: /scripts, readOnly: true}\n        volumes:\n          - name: scripts\n            configMap: {name: power-scripts, defaultMode: 0555}\n      ttlSecondsAfterFinished: 600\n", op, anchor, op, i)
		}
	}
	return b.String()
}

// TestTenThousandSlotsWithPodSpecsLoad: the alias bound is no bound on an
// honest large pool: 10,000 slots with pod specs of their own, or sharing
// one by alias, load.
func TestTenThousandSlotsWithPodSpecsLoad(t *testing.T) {
	// CPU-bound and alone with its data: beside the other large one.
	t.Parallel()
	for _, shared := range []bool{false, true} {
		cfg, err := Parse("big.yaml", []byte(bigPool(10_000, shared)))
		if err != nil {
			t.Fatalf("shared=%v: %v", shared, firstLines(err.Error(), 3))
		}
		if len(cfg.Slots) != 10_000 {
			t.Fatalf("shared=%v: %d slots, want 10000", shared, len(cfg.Slots))
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
