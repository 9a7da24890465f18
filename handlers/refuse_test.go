package handlers_test

import (
	"context"
	"errors"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
)

// A host that joins a slot nobody claimed is reported before anything is
// done to it: with the apiserver refusing every Node patch, the refusal is
// in the log, the pass reports the failed cordon, and once the apiserver
// is back the Node is cordoned and tainted without a second report.
func TestRefusalIsAppendedBeforeTheNodeIsTouched(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a")
	refusePatches := true
	e.f.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refusePatches {
			return true, nil, errors.New("apiserver unavailable")
		}
		return false, nil, nil
	})
	e.register("a", true)
	ctx := context.Background()
	if err := e.cl.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := e.r.ReconcileAll(ctx)
	if err == nil {
		t.Fatal("a failed cordon was not reported")
	}
	if got := e.refusals("a"); got != 1 {
		t.Fatalf("%d refusals in the log before the cordon, want 1 (err %v)", got, err)
	}
	if n, _ := e.cl.Node("a"); n.Unschedulable || n.HasTaint(handlers.RefusedTaint) {
		t.Fatalf("node touched although every patch failed: %+v", n)
	}
	refusePatches = false
	e.passes()
	if n, _ := e.cl.Node("a"); !n.Unschedulable || !n.HasTaint(handlers.RefusedTaint) {
		t.Fatalf("node not cordoned and tainted: %+v", n)
	}
	if got := e.refusals("a"); got != 1 {
		t.Fatalf("%d refusals, want 1", got)
	}
}

func (e *renv) refusals(slot string) int {
	e.t.Helper()
	n := 0
	err := e.h.Store.ReadAggregate(context.Background(), events.SlotAggregate(slot), func(ev events.Event) error {
		if _, ok := ev.Data.(events.HostJoinRefused); ok {
			n++
		}
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}
