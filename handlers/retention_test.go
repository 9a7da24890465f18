package handlers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/projections"
)

// An always-on claim older than the retention: once every event of it
// expired, views started from the checkpoint (no snapshot) still hold it
// ready, so the input law leaves its machine on and a later move of the
// claim is decided and written.
func TestAlwaysOnClaimOutlivesItsEvents(t *testing.T) {
	srv := eventstest.StartServer(t)
	h := handlerstest.OnServer(t, srv, eventlog.StoreConfig{Stream: "RETENTION", MaxAge: 2 * time.Second})
	e := &renv{t: t, h: h, f: kube.NewFake()}
	e.f.StampCreation(func() time.Time { return e.h.Clock.Now().UTC() }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.cl = e.f.NewCluster(kube.Options{Namespace: ns})
	e.cl.Start(ctx)
	t.Cleanup(func() { cancel(); e.cl.Shutdown() })
	if !e.cl.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	e.acts = &actionLog{Cluster: e.cl, store: h.Store}
	e.r = handlers.NewReactors(handlers.ReactorsConfig{Views: h.Views, Service: h.Service, Cluster: e.acts, Clock: h.Clock, Namespace: ns, Log: rquiet})

	e.declare("g", events.GroupSpec{}, false, "a")
	c := e.bootToReady("g", "a")
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	cps, err := projections.OpenCheckpoints(ctx, js, "retention-checkpoints", 1)
	if err != nil {
		t.Fatal(err)
	}
	var cp projections.CheckpointInfo
	h.Read(func(s *projections.State) { cp, err = cps.Save(ctx, s, h.Clock.Now()) })
	if err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := h.Store.Bounds(ctx)
		if err != nil || b.First <= cp.Seq {
			return fmt.Errorf("log starts at %d (%v), want past the checkpoint at %d", b.First, err, cp.Seq)
		}
		return nil
	})

	// A fresh process: no snapshot, the log's events all expired.
	views := projections.NewRunner(h.Store, projections.RunnerOptions{Checkpoints: cps, Logger: rquiet})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { _ = views.Run(ctx) }()
	svc := handlers.NewService(h.Store, views, h.Clock, "/claimstream/test", rquiet)
	r := handlers.NewReactors(handlers.ReactorsConfig{Views: views, Service: svc, Cluster: e.acts, Clock: h.Clock, Namespace: ns, Log: rquiet})
	before := len(e.jobs())
	for i := 0; i < 3; i++ {
		e.step(time.Minute)
		if _, err := r.ReconcileAll(ctx); err != nil {
			t.Fatal(err)
		}
		if err := e.cl.Settle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var got *projections.Claim
	var sl *projections.Slot
	views.Read(func(s *projections.State) {
		got, sl = s.Claims[c.Name], s.Slots["a"]
	})
	if got == nil || got.Phase != projections.PhaseReady {
		t.Fatalf("always-on claim after its events expired: %+v, want ready", got)
	}
	if sl.LastShutdown != nil || len(e.jobs()) != before {
		t.Fatalf("the machine of a ready claim was shut down: %+v, jobs %v", sl.LastShutdown, e.jobs())
	}
	// A later move of the claim: scaled down by cluster-autoscaler.
	res, err := svc.Execute(ctx, decide.DeleteNodes{Group: "g", Nodes: []decide.NodeRef{{Name: "a"}}, RequestedBy: "cluster-autoscaler"})
	if err != nil {
		t.Fatalf("scale-down of the claim after its events expired: %v", err)
	}
	if err := views.WaitFor(ctx, res.Last); err != nil {
		t.Fatal(err)
	}
	views.Read(func(s *projections.State) { got = s.Claims[c.Name] })
	if got == nil || got.ScaleDown == nil {
		t.Fatalf("the scale-down was not recorded on the claim: %+v", got)
	}
	if views.Refused() != 0 {
		t.Fatalf("%d events refused by the model", views.Refused())
	}
}
