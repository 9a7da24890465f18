package handlers_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/scale"
)

// groupFacts are the demand facts written on the group's aggregate.
func groupFacts(t *testing.T, h *handlerstest.Harness, group string) []events.Event {
	t.Helper()
	var out []events.Event
	if err := h.Store.Read(context.Background(), 1, 0, func(e events.Event) error {
		switch e.Data.(type) {
		case events.ScaleRequested, events.DemandObserved:
			if e.Aggregate == events.GroupAggregate(group) {
				out = append(out, e)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every size call is a demand fact: an accepted one in the append of its
// claims, a refused one alone with the refusal's words; a refusal repeated
// within the window is counted and carried by the next one written.
func TestSizeCallsAreRecordedAcceptedOrRefused(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("g", events.GroupSpec{MaxSize: 2}, "a", "b", "c")
	res := h.MustExec(decide.IncreaseSize{Group: "g", Delta: 2, RequestedBy: "cluster-autoscaler"})
	var inAppend *events.ScaleRequested
	for _, e := range res.Events {
		if d, ok := e.Data.(events.ScaleRequested); ok {
			inAppend = &d
		}
	}
	if inAppend == nil || !inAppend.Accepted || inAppend.Delta != 2 || inAppend.Call != events.CallIncreaseSize || inAppend.Requester != "cluster-autoscaler" {
		t.Fatalf("the accepted call's append: %+v, want its ScaleRequested", res.Events)
	}
	refused := func() {
		t.Helper()
		if _, err := h.Exec(decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "cluster-autoscaler"}); decide.CodeOf(err) != decide.CodeFailedPrecondition {
			t.Fatalf("want a maxSize refusal, got %v", err)
		}
	}
	refused()
	refused() // within the window: counted, not written
	refused()
	facts := groupFacts(t, h, "g")
	if len(facts) != 2 {
		t.Fatalf("%d facts after one accepted and three refused calls within a minute, want 2: %+v", len(facts), facts)
	}
	first := facts[1].Data.(events.ScaleRequested)
	if first.Accepted || first.Delta != 1 || first.Repeats != 0 || first.Reason == "" {
		t.Fatalf("the refusal: %+v", first)
	}
	h.Clock.Step(events.RefusalRepeatWindow)
	refused()
	facts = groupFacts(t, h, "g")
	if len(facts) != 3 {
		t.Fatalf("%d facts after the window, want 3", len(facts))
	}
	if again := facts[2].Data.(events.ScaleRequested); again.Repeats != 2 || again.Reason != first.Reason {
		t.Fatalf("the refusal after the window: %+v, want the 2 repeats counted", again)
	}
	// The built-in scaler's own calls are not demand facts (its demand is
	// the pods: DemandObserved).
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "cluster-autoscaler"})
	h.MustExec(decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "b"}}, RequestedBy: handlers.BuiltinRequester, Call: events.CallDecide})
	facts = groupFacts(t, h, "g")
	if len(facts) != 4 || facts[3].Data.(events.ScaleRequested).Call != events.CallDeleteNodes {
		t.Fatalf("facts: %+v, want one more, the DeleteNodes of cluster-autoscaler", facts)
	}
}

func workPod(name, node string) *corev1.Pod {
	phase := corev1.PodPending
	if node != "" {
		phase = corev1.PodRunning
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
}

// The built-in scaler writes the work it sees when it changes, never per
// pass.
func TestBuiltinDemandIsRecordedOnChange(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("b", events.GroupSpec{Scaler: events.ScalerBuiltin, Builtin: &events.BuiltinScaler{PodsPerNode: 4, MaxNodes: 2, Hold: events.Duration(time.Minute)}}, "b1", "b2")
	pass := func(pods ...*corev1.Pod) {
		t.Helper()
		h.MustExec(handlers.ScaleGroup{Group: "b", Obs: &scale.Observation{Pods: pods}})
	}
	pass(workPod("p1", ""), workPod("p2", ""))
	pass(workPod("p1", ""), workPod("p2", "")) // the same work: nothing
	pass(workPod("p1", "b1"), workPod("p2", ""))
	var seen []events.DemandObserved
	for _, e := range groupFacts(t, h, "b") {
		seen = append(seen, e.Data.(events.DemandObserved))
	}
	if len(seen) != 2 {
		t.Fatalf("%d DemandObserved over three passes of which two saw the same work, want 2: %+v", len(seen), seen)
	}
	if seen[0].Demand != 2 || seen[0].Pending != 2 || seen[0].Running != 0 || seen[1].Pending != 1 || seen[1].Running != 1 {
		t.Fatalf("demand facts: %+v", seen)
	}
}
