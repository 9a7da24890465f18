package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"

	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
)

// startupHealth answers the REST API's health paths on its address while
// serve starts, so that a start that waits (for a consumer of the log, at
// the stream's consumer limit) says why on /readyz. Every path answers 503
// with status "starting": /healthz too, so the chart's startup probe still
// bounds a start that never ends. It gives the address up to the REST API
// once the plane is built (handOver).
type startupHealth struct {
	views atomic.Pointer[projections.Runner]

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// newStartupHealth returns the start-up answers, to be served by run.
func newStartupHealth() *startupHealth {
	ctx, cancel := context.WithCancel(context.Background())
	return &startupHealth{ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// watch makes /readyz report the views' problem while they are built.
func (h *startupHealth) watch(views *projections.Runner) {
	if h != nil {
		h.views.Store(views)
	}
}

// run serves the start-up answers with serve (the REST API's listener and
// TLS) until ctx ends or handOver is called.
func (h *startupHealth) run(ctx context.Context, serve func(context.Context, http.Handler) error) error {
	defer close(h.done)
	defer context.AfterFunc(ctx, h.cancel)()
	defer h.cancel()
	return serve(h.ctx, http.HandlerFunc(h.answer))
}

// handOver stops the start-up answers and waits until their listener is
// closed, so that the REST API can listen on the address. run must have
// been started.
func (h *startupHealth) handOver() {
	if h == nil {
		return
	}
	h.cancel()
	<-h.done
}

func (h *startupHealth) answer(w http.ResponseWriter, r *http.Request) {
	body := rest.Health{Status: "starting"}
	if v := h.views.Load(); v != nil {
		body.Seq = v.Seq()
		body.Problem, _ = v.Problem()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "5")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(body)
}
