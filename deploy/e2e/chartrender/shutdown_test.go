package chartrender

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// serve's whole stop (--shutdown-timeout) ends before the kubelet kills
// the pod (terminationGracePeriodSeconds), with a margin, both from one
// value; a grace period too short for a stop is refused.
func TestShutdownFitsTheGracePeriod(t *testing.T) {
	for _, c := range []struct {
		doc   string
		grace int64
	}{{"", 30}, {"terminationGracePeriodSeconds: 60", 60}, {"{replicas: 3, terminationGracePeriodSeconds: 20}", 20}} {
		objs := mustRender(t, c.doc)
		sts := mustFind(t, objs, "StatefulSet", "claimstream")
		g, ok, err := unstructured.NestedFieldNoCopy(sts.Object, "spec", "template", "spec", "terminationGracePeriodSeconds")
		if err != nil || !ok {
			t.Fatalf("%q: no terminationGracePeriodSeconds (%v)", c.doc, err)
		}
		if got := mustInt(t, g); got != c.grace {
			t.Errorf("%q: terminationGracePeriodSeconds %d, want %d", c.doc, got, c.grace)
		}
		d, err := time.ParseDuration(args(t, objs)["--shutdown-timeout"])
		if err != nil {
			t.Fatalf("%q: --shutdown-timeout: %v", c.doc, err)
		}
		if margin := time.Duration(c.grace)*time.Second - d; margin != 5*time.Second {
			t.Errorf("%q: --shutdown-timeout %s leaves %s of the %ds grace period, want 5s", c.doc, d, margin, c.grace)
		}
	}
	mustErr(t, fmt.Sprintf("terminationGracePeriodSeconds: %d", 10), "terminationGracePeriodSeconds")
}
