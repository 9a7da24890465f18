package suite

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// costRows is what the test reads of GET /api/v1/cost (the CostReport of
// schemas/openapi.yaml).
type costRows struct {
	Rows []struct {
		Key          string  `json:"key"`
		Currency     string  `json:"currency"`
		MachineHours float64 `json:"machineHours"`
		KWh          float64 `json:"kWh"`
	} `json:"rows"`
}

// One claim's machine-hours in `GET /api/v1/cost` are the time between its
// Node's Ready condition turning True (kwok) and turning Unknown (the
// machine model's power-off), to the second the Node says.
func TestCostOfOneClaimFromNodeConditions(t *testing.T) {
	dumpOnFailure(t)
	ready := watchReady(t, "cost-1")
	increaseSize(t, "cost", 1)
	waitT(t, 90*time.Second, "cost-1's claim ready (instance running)", func() (bool, string) {
		in := instances(t, "cost")[providerID("cost-1")]
		return in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning, describeInstances(instances(t, "cost"))
	})
	claim := jobs(t, map[string]string{lOp: "startup", lSlot: "cost-1"})[0].Labels[lClaim]
	from := len(model.EventsOf("cost-1"))
	if _, err := provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id: "cost", Nodes: []*pb.ExternalGrpcNode{{ProviderID: providerID("cost-1"), Name: "cost-1"}},
	}); err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	waitMachine(t, "cost-1", "power-off", from, 60*time.Second)
	var on, off time.Time
	waitT(t, 30*time.Second, "the Node's Ready condition turned True, then not True", func() (bool, string) {
		on, off = ready.span()
		return !on.IsZero() && !off.IsZero(), fmt.Sprintf("on %s off %s", on, off)
	})
	want := off.Sub(on).Seconds()
	waitT(t, 60*time.Second, "the cost report shows the claim's machine-hours", func() (bool, string) {
		rep, err := costReport(url.Values{"by": {"claim"}, "since": {"1d"}})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rep.Rows {
			if r.Key == claim {
				got := r.MachineHours * 3600
				// Rows are rounded to a millionth of an hour (3.6 ms).
				return math.Abs(got-want) < 0.01 && r.Currency == "EUR" && r.KWh > 0, fmt.Sprintf("claim %s: %g machine-seconds, the Node says %g (%s to %s); row %+v", claim, got, want, on, off, r)
			}
		}
		return false, fmt.Sprintf("no row for claim %s in %+v", claim, rep.Rows)
	})
}

// readyWatch records the Node's Ready condition transitions.
type readyWatch struct {
	mu      sync.Mutex
	on, off time.Time
}

func (w *readyWatch) span() (time.Time, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.on, w.off
}

func watchReady(t *testing.T, name string) *readyWatch {
	t.Helper()
	ctx := ctxFor(t, 10*time.Minute)
	wi, err := admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatalf("watch node %s: %v", name, err)
	}
	t.Cleanup(wi.Stop)
	rw := &readyWatch{}
	go func() {
		for ev := range wi.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if !ok {
				continue
			}
			for _, c := range n.Status.Conditions {
				if c.Type != corev1.NodeReady {
					continue
				}
				rw.mu.Lock()
				switch {
				case c.Status == corev1.ConditionTrue && rw.on.IsZero():
					rw.on = c.LastTransitionTime.Time
				case c.Status != corev1.ConditionTrue && !rw.on.IsZero() && rw.off.IsZero():
					rw.off = c.LastTransitionTime.Time
				}
				rw.mu.Unlock()
			}
		}
	}()
	return rw
}

// costReport reads GET /api/v1/cost with the token serve wrote in its data dir.
func costReport(q url.Values) (costRows, error) {
	var rep costRows
	token, err := os.ReadFile(filepath.Join(server.Dir, "claimstream-data", "api-token"))
	if err != nil {
		return rep, err
	}
	req, err := http.NewRequest(http.MethodGet, "http://"+server.APIAddress+"/api/v1/cost?"+q.Encode(), nil)
	if err != nil {
		return rep, err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return rep, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("GET /api/v1/cost: %s", resp.Status)
	}
	return rep, json.NewDecoder(resp.Body).Decode(&rep)
}
