package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/internal/power/powercmd"
)

// clusterOptions say which cluster the reactors act on.
type clusterOptions struct {
	kubeconfig string
	namespace  string
	// powerImage runs the power drivers' Jobs (`claimstream power`).
	powerImage string
	// powerEvery is how often a Node-less slot's power driver is read
	// (0: never).
	powerEvery time.Duration
	scenario   string
	speed      float64
	seed       int64

	// releaseNamespace holds the leader Lease, the status ConfigMap and
	// serve's Pod (leaseNamespace); namespace holds the Jobs.
	releaseNamespace string
	// kubeQPS and kubeBurst size the API client's one rate limiter.
	kubeQPS   float32
	kubeBurst int

	leaderElect bool
	leaseName   string

	// statusInterval bounds the writes of the status ConfigMap.
	statusInterval time.Duration

	// onWorld, when set, is given the simulator's world before it starts
	// (tests count the API calls its fake cluster receives).
	onWorld func(*sim.World)
	// client, when set, is the Kubernetes API instead of a kubeconfig's
	// (tests pass kube.NewFake()).
	client kube.Client
}

// leaseNamespace is the release's namespace: --release-namespace, else the
// Pod's own ($POD_NAMESPACE from the downward API), else --namespace. The
// chart's Roles for the Lease and the status ConfigMap are there, while
// the Jobs may be in another namespace (jobNamespace).
func (o clusterOptions) leaseNamespace() string {
	return first(o.releaseNamespace, os.Getenv("POD_NAMESPACE"), o.namespace)
}

// inCluster reports whether the process runs in a Kubernetes pod.
func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

// simulated: with no kubeconfig and not in a pod, serve runs the simulator,
// so it works on a fresh laptop.
func (o clusterOptions) simulated() bool {
	return o.kubeconfig == "" && o.client == nil && !inCluster()
}

// clusterClock is the clock of the whole plane: the simulator's scenario may
// run time faster than the wall clock.
func (o clusterOptions) clusterClock() (clock.Clock, *sim.Scenario, error) {
	if !o.simulated() {
		return clock.RealClock{}, nil, nil
	}
	if o.scenario == "" {
		return clock.RealClock{}, nil, nil
	}
	sc, err := sim.LoadScenario(o.scenario)
	if err != nil {
		return nil, nil, fmt.Errorf("--scenario: %w", err)
	}
	speed := sc.Speed
	if o.speed > 0 {
		speed = o.speed
	}
	if speed <= 0 {
		speed = 1
	}
	sc.Speed = speed
	return sim.NewScaledClock(speed), sc, nil
}

// runCluster runs the reactors against the simulator or a real cluster
// until ctx ends: the leader's work (serve_leader.go). Every change they
// make to the cluster is preceded by the leadership proof.
func (p *plane) runCluster(ctx context.Context, o clusterOptions, sc *sim.Scenario) error {
	if o.simulated() {
		return p.runSimulated(ctx, o, sc)
	}
	cl := kube.New(p.lead.kube, kube.Options{Namespace: o.namespace, PowerImage: o.powerImage})
	cl.Start(ctx)
	defer cl.Shutdown()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	synced := cl.WaitForSync(sctx)
	cancel()
	if !synced {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("the Node and Job caches did not sync within 2m: check the RBAC of the service account")
	}
	p.log.Info("reactors running", "cluster", p.lead.kubeHost, "namespace", cl.Namespace())
	cfg := handlers.ReactorsConfig{Views: p.views, Service: p.service, Cluster: cl, Clock: p.clock, Namespace: cl.Namespace(), Log: p.log, Metrics: p.reactorMetrics(), Fence: p.lead.leadership.Prove}
	if o.powerEvery > 0 {
		cfg.Power, cfg.PowerEvery = powercmd.Reader{Secret: cl.Secret}, o.powerEvery
		if p.tel != nil {
			cfg.PowerMetrics = p.tel.Metrics
		}
	}
	r := handlers.NewReactors(cfg)
	return p.withSinks(ctx, p.withKubeReports(cl, o, r.Run))
}

func (p *plane) runSimulated(ctx context.Context, o clusterOptions, sc *sim.Scenario) error {
	cfg := sim.WorldConfig{Views: p.views, Service: p.service, Clock: p.clock, Namespace: o.namespace, Seed: o.seed, Log: p.log, Metrics: p.reactorMetrics(), Fence: p.lead.leadership.Prove}
	if sc != nil {
		cfg.Timing = sc.TimingOf()
	}
	w := sim.NewWorld(cfg)
	if o.onWorld != nil {
		o.onWorld(w)
	}
	if err := w.Start(ctx); err != nil {
		return fmt.Errorf("simulator: %w", err)
	}
	defer w.Stop()
	if sc != nil {
		p.log.Info("simulated cluster playing a scenario", "file", o.scenario, "speed", sc.Speed, "steps", len(sc.Steps))
		played := make(chan struct{})
		go func() {
			defer close(played)
			if err := w.PlayRealtime(ctx, sc); err != nil && ctx.Err() == nil {
				p.log.Error("scenario", "err", err)
			}
		}()
		defer func() { <-played }() // before w.Stop: the scenario drives the world
	} else {
		p.log.Info("simulated cluster (no --kubeconfig): machines boot when claims ask for them")
	}
	return p.withSinks(ctx, w.Run)
}

// reactorMetrics observe the reactors' work queue (nil: no telemetry).
func (p *plane) reactorMetrics() handlers.QueueMetrics {
	if p.tel == nil {
		return nil
	}
	return p.tel.Metrics
}

// withSinks runs the CloudEvents sinks next to the reactors: only where the
// reactors run (the leader), or two replicas would deliver every event twice.
func (p *plane) withSinks(ctx context.Context, run func(context.Context) error) error {
	if len(p.sinks.Sinks) == 0 {
		return run(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		d := &sinks.Dispatcher{JS: p.store.JetStream(), Store: p.store, Config: p.sinks, Clock: p.clock, Logger: p.log}
		if p.tel != nil {
			d.Metrics = p.tel.Metrics
		}
		errs <- d.Run(ctx)
	}()
	err := run(ctx)
	cancel()
	if serr := <-errs; err == nil && serr != nil && !errors.Is(serr, context.Canceled) {
		err = fmt.Errorf("sinks: %w", serr)
	}
	return err
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("in-cluster config: %w", err)
	}
	return cfg, nil
}
