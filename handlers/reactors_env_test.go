package handlers_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/projections"
)

// renv is one reactor test: a real embedded JetStream store and views
// (handlerstest), client-go's fake clientset under the kube adapter, the
// reactors, a fake clock. The test plays kubelet and Job controller by hand.
type renv struct {
	t  *testing.T
	h  *handlerstest.Harness
	f  *kube.Fake
	cl *kube.Cluster
	r  *handlers.Reactors
	// acts records every change the reactors made to the cluster, with the
	// log's end at the time of the call (append_then_act_test.go).
	acts *actionLog
}

const ns = "claimstream"

var rquiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

var testPodSpec = json.RawMessage(`{"containers":[{"name":"power","image":"busybox:1.37"}]}`)

func newRenv(t *testing.T) *renv { return newRenvWith(t, kube.Options{}, nil) }

// newRenvWith is newRenv with the cluster's options (its namespace is
// always ns) and a change to the reactors' configuration.
func newRenvWith(t *testing.T, o kube.Options, cfg func(e *renv, c *handlers.ReactorsConfig)) *renv {
	t.Helper()
	e := &renv{t: t, h: handlerstest.New(t), f: kube.NewFake()}
	e.f.StampCreation(func() time.Time { return e.h.Clock.Now().UTC() }, nil)
	ctx, cancel := context.WithCancel(context.Background())
	o.Namespace = ns
	e.cl = e.f.NewCluster(o)
	e.cl.Start(ctx)
	t.Cleanup(func() { cancel(); e.cl.Shutdown() })
	if !e.cl.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	e.acts = &actionLog{Cluster: e.cl, store: e.h.Store}
	c := handlers.ReactorsConfig{Views: e.h.Views, Service: e.h.Service, Cluster: e.acts, Clock: e.h.Clock, Namespace: ns, Log: rquiet}
	if cfg != nil {
		cfg(e, &c)
	}
	e.r = handlers.NewReactors(c)
	return e
}

// declare writes a group and slots with startup and shutdown specs
// (startup nil when noStartup).
func (e *renv) declare(group string, spec events.GroupSpec, noStartup bool, slots ...string) {
	e.t.Helper()
	e.h.DeclareWith(group, spec, func(sl string) events.SlotSpec {
		ss := events.SlotSpec{ProviderID: "homelab://" + sl, Shutdown: &events.JobSpec{PodSpec: testPodSpec},
			Labels: map[string]string{"claimstream.dev/rack": "a"}, Taints: []events.Taint{{Key: "claimstream.dev/slow", Effect: "PreferNoSchedule"}}}
		if !noStartup {
			ss.Startup = &events.JobSpec{PodSpec: testPodSpec}
		}
		return ss
	}, slots...)
}

// pass lets the caches catch up, runs every reactor once, catches up.
func (e *renv) pass() time.Duration {
	e.t.Helper()
	ctx := context.Background()
	if err := e.cl.Settle(ctx); err != nil {
		e.t.Fatal(err)
	}
	d, err := e.r.ReconcileAll(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.cl.Settle(ctx); err != nil {
		e.t.Fatal(err)
	}
	return d
}

// passes runs passes until the views stop changing.
func (e *renv) passes() time.Duration {
	e.t.Helper()
	for i := 0; ; i++ {
		seq := e.h.Views.Seq()
		d := e.pass()
		if e.h.Views.Seq() == seq || i > 20 {
			return d
		}
	}
}

func (e *renv) step(d time.Duration) { e.h.Clock.Step(d) }

func (e *renv) claim(slot string) projections.Claim {
	var c projections.Claim
	e.h.Read(func(s *projections.State) {
		if sl := s.Slots[slot]; sl != nil && len(sl.Claims) > 0 {
			c = *s.Claims[sl.Claims[len(sl.Claims)-1]]
			c.Timeline = append([]projections.Step(nil), c.Timeline...)
		}
	})
	return c
}

func (e *renv) slot(name string) projections.Slot {
	var sl projections.Slot
	e.h.Read(func(s *projections.State) { sl = *s.Slots[name] })
	return sl
}

func (e *renv) increase(group string, n int) {
	e.t.Helper()
	e.h.MustExec(decide.IncreaseSize{Group: group, Delta: n, RequestedBy: "cluster-autoscaler"})
}

func (e *renv) finishJob(name string, ok bool, reason string) {
	e.t.Helper()
	if err := e.f.FinishJob(context.Background(), ns, name, ok, reason, "", e.h.Clock.Now()); err != nil {
		e.t.Fatal(err)
	}
}

func (e *renv) register(slot string, ready bool, taints ...events.Taint) {
	e.t.Helper()
	ctx := context.Background()
	if err := e.f.RegisterNode(ctx, slot, "homelab://"+slot, taints, e.h.Clock.Now()); err != nil {
		e.t.Fatal(err)
	}
	if ready {
		if err := e.f.SetNodeReady(ctx, slot, true, e.h.Clock.Now()); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *renv) setReady(slot string, ready bool) {
	e.t.Helper()
	if err := e.f.SetNodeReady(context.Background(), slot, ready, e.h.Clock.Now()); err != nil {
		e.t.Fatal(err)
	}
}

// jobs lists the Job names in the namespace.
func (e *renv) jobs() map[string]bool {
	e.t.Helper()
	list, err := e.f.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for _, j := range list.Items {
		out[j.Name] = true
	}
	return out
}

// bootToReady takes a fresh claim on slot to ready by hand.
func (e *renv) bootToReady(group, slot string) projections.Claim {
	e.t.Helper()
	e.increase(group, 1)
	e.passes()
	c := e.claim(slot)
	e.finishJob(c.StartupJob, true, "")
	e.register(slot, true)
	e.passes()
	c = e.claim(slot)
	if c.Phase != projections.PhaseReady {
		e.t.Fatalf("claim %s is %s, want ready", c.Name, c.Phase)
	}
	return c
}

func timelineTypes(c projections.Claim) []events.Type {
	var out []events.Type
	for _, s := range c.Timeline {
		out = append(out, s.Type)
	}
	return out
}

var cilium = projections.DefaultReadinessTaint
