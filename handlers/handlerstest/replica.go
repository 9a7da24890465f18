package handlerstest

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/projections"
)

// Replica is another replica on the harness's log, as a second serve
// process has it: its own store, views, command service (with
// its own group locks) and clock reading.
type Replica struct {
	Store   *eventlog.Store
	Views   *projections.Runner
	Service *handlers.Service
}

// Replica opens another replica on the harness's stream; it stops when the
// test ends.
func (h *Harness) Replica(source string) *Replica {
	h.T.Helper()
	ctx := context.Background()
	// The process's one privileged connection: replicas differ in their
	// store, views, locks and leadership, which is what is under test.
	js, err := jetstream.New(h.Server.Conn)
	if err != nil {
		h.T.Fatal(err)
	}
	r := &Replica{}
	if r.Store, err = eventlog.OpenStore(ctx, js, h.StoreConfig); err != nil {
		h.T.Fatal(err)
	}
	r.Views = projections.NewRunner(r.Store, projections.RunnerOptions{Logger: quiet})
	if err := r.Views.Start(ctx); err != nil {
		h.T.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Views.Run(rctx) }()
	h.T.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			h.T.Errorf("replica views: %v", err)
		}
	})
	r.Service = handlers.NewService(r.Store, r.Views, h.Clock, source, quiet)
	return r
}
