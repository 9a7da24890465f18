package handlers_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
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

// staleNodes is a cluster whose Node cache lags behind a delete, as an
// informer's does: a deleted Node is still seen on the next passes.
type staleNodes struct {
	handlers.Cluster
	mu      sync.Mutex
	deleted map[string]handlers.NodeView
}

func (s *staleNodes) Node(name string) (handlers.NodeView, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.deleted[name]; ok {
		return n, true
	}
	return s.Cluster.Node(name)
}

func (s *staleNodes) DeleteNode(ctx context.Context, name string) error {
	n, ok := s.Cluster.Node(name)
	if err := s.Cluster.DeleteNode(ctx, name); err != nil {
		return err
	}
	if ok {
		s.mu.Lock()
		s.deleted[name] = n
		s.mu.Unlock()
	}
	return nil
}

// lineCounter counts the log lines with a given message.
type lineCounter struct {
	mu    sync.Mutex
	lines map[string]int
}

func (c *lineCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *lineCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines[r.Message]++
	return nil
}
func (c *lineCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *lineCounter) WithGroup(string) slog.Handler      { return c }

// TestNodeCleanupLogsEachDeleteOnce: while the Node cache still shows the
// deleted Node, later passes delete it again (NotFound is success) but say
// "deleted" only once per recorded delete.
func TestNodeCleanupLogsEachDeleteOnce(t *testing.T) {
	e := newRenv(t)
	stale := &staleNodes{Cluster: e.acts, deleted: map[string]handlers.NodeView{}}
	lc := &lineCounter{lines: map[string]int{}}
	e.r = handlers.NewReactors(handlers.ReactorsConfig{Views: e.h.Views, Service: e.h.Service, Cluster: stale, Clock: e.h.Clock, Namespace: ns, Log: slog.New(lc)})
	e.declare("g", events.GroupSpec{}, false, "a")
	e.register("a", true)
	e.passes()
	for j := range e.jobs() {
		e.finishJob(j, true, "")
	}
	e.setReady("a", false)
	e.passes()
	e.pass()
	e.pass()
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if n := lc.lines["deleted the NotReady node of a powered-off machine"]; n != 1 {
		t.Fatalf("the delete was logged %d times, want once", n)
	}
}
