package chartrender

import (
	"strings"
	"testing"
)

// Values the chart must refuse (no cluster needed).
func TestRenderRefusesBadValues(t *testing.T) {
	for _, c := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"unknown tls mode", map[string]any{"tls": map[string]any{"mode": "self"}}, "tls"},
		{"replicas without leader election", map[string]any{"replicas": 3, "leaderElection": map[string]any{"enabled": false}}, "leaderElection"},
		{"existing tls without the server secret", map[string]any{"tls": map[string]any{"mode": "existing"}}, "tls.serverSecret"},
		{"bad log level", map[string]any{"logLevel": "loud"}, "logLevel"},
		{"retention in weeks", map[string]any{"persistence": map[string]any{"retention": "2w"}}, "retention"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render("claimstream", "ns", c.vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

func TestRenderDefaults(t *testing.T) {
	objs, err := Render("claimstream", "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "" || o.GetName() == "" {
			t.Errorf("object without kind or name: %v", o.Object)
		}
	}
}

// rbac.builtinScaler=auto grants the workload informers only when a group
// of the pool is builtin.
func TestBuiltinScalerRBAC(t *testing.T) {
	has := func(vals map[string]any) bool {
		objs, err := Render("claimstream", "ns", vals)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			if o.GetKind() != "ClusterRole" || o.GetName() != "claimstream" {
				continue
			}
			rules, _ := o.Object["rules"].([]any)
			for _, r := range rules {
				for _, g := range r.(map[string]any)["apiGroups"].([]any) {
					if g == "apps" {
						return true
					}
				}
			}
		}
		return false
	}
	builtinPool := map[string]any{"config": map[string]any{
		"groups": []any{map[string]any{"name": "burst", "scaler": "builtin"}},
		"slots":  []any{},
	}}
	for _, c := range []struct {
		name string
		vals map[string]any
		want bool
	}{
		{"defaults", nil, false},
		{"a builtin group", map[string]any{"pool": builtinPool}, true},
		{"existing pool ConfigMap", map[string]any{"pool": map[string]any{"existingConfigMap": "p"}}, true},
		{"forced off", map[string]any{"pool": builtinPool, "rbac": map[string]any{"builtinScaler": false}}, false},
	} {
		if got := has(c.vals); got != c.want {
			t.Errorf("%s: workload RBAC %v, want %v", c.name, got, c.want)
		}
	}
}

// persistence.retention reaches serve as --retention.
func TestRetentionReachesServe(t *testing.T) {
	for _, c := range []struct {
		vals map[string]any
		want string
	}{
		{nil, "--retention=400d"},
		{map[string]any{"persistence": map[string]any{"retention": "0"}}, "--retention=0"},
		{map[string]any{"persistence": map[string]any{"retention": "36h"}}, "--retention=36h"},
	} {
		objs, err := Render("claimstream", "ns", c.vals)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, o := range objs {
			if o.GetKind() != "StatefulSet" {
				continue
			}
			spec := o.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
			for _, a := range spec["containers"].([]any)[0].(map[string]any)["args"].([]any) {
				found = found || a == c.want
			}
		}
		if !found {
			t.Errorf("values %v: no %s in serve's args", c.vals, c.want)
		}
	}
}
