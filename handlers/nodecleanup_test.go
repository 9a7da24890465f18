package handlers_test

import (
	"testing"

	"github.com/claimstream/claimstream/events"
)

func TestNodeCleanupKeepsANodeWithALiveClaimOrNoShutdown(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{}, false, "a", "b")
	// b: a NotReady node, no claim, nothing ever shut it down: left alone.
	e.register("b", false)
	e.passes()
	if _, ok := e.cl.Node("b"); !ok {
		t.Fatal("deleted a node no shutdown powered off")
	}
	// a: ready claim, node NotReady: the machine-gone watch has it.
	e.bootToReady("g", "a")
	e.setReady("a", false)
	e.passes()
	if _, ok := e.cl.Node("a"); !ok {
		t.Fatal("deleted the node of a live claim")
	}
}
