package provider

import (
	"strings"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// Under a stream of events, NodeGroups builds again only the groups an
// event named: the other groups' entries are the ones already built, and
// the changed group's entry shows the change.
func TestNodeGroupsRebuildsOnlyChangedGroups(t *testing.T) {
	e := newEnv(t, Options{})
	for _, g := range []string{"a", "b"} {
		declare(t, e.h, g, events.GroupSpec{}, slotsNamed(g+"-0", g+"-1")...)
	}
	ctx := e.ctx()
	byID := func() map[string]*pb.NodeGroup {
		r, err := e.srv.NodeGroups(ctx, &pb.NodeGroupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*pb.NodeGroup{}
		for _, g := range r.GetNodeGroups() {
			out[g.GetId()] = g
		}
		return out
	}
	// An event after the server subscribed, so it has seen the views' end.
	e.h.MustExec(decide.IncreaseSize{Group: "a", Delta: 1, RequestedBy: "test"})
	before := byID()
	e.h.MustExec(decide.IncreaseSize{Group: "a", Delta: 1, RequestedBy: "test"})
	after := byID()
	if after["b"] != before["b"] {
		t.Errorf("group b's entry was built again after an event of group a")
	}
	if after["a"] == before["a"] || !strings.Contains(after["a"].GetDebug(), "target=2") {
		t.Errorf("group a's entry after its second claim: %q", after["a"].GetDebug())
	}
	e.h.MustExec(decide.IncreaseSize{Group: "b", Delta: 1, RequestedBy: "test"})
	last := byID()
	if last["a"] != after["a"] || !strings.Contains(last["b"].GetDebug(), "target=1") {
		t.Errorf("after an event of group b: a reused %v, b %q", last["a"] == after["a"], last["b"].GetDebug())
	}
}
