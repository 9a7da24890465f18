package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/leader"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
)

// The leadership of serve (docs/operations/replicas.md): one
// replica leads; it alone applies the pool file, runs the reactors or the
// simulated world, the built-in scaler, the sinks, and writes snapshots
// and checkpoints. Every replica serves the provider and the REST API:
// a follower answers reads from views that reached the log's end and
// refuses writes, naming the leader.

// leaderState is what the plane keeps of the election.
type leaderState struct {
	elector    leader.Elector
	leadership *handlers.Leadership
	// cause is how leadership is won, written in LeaderElected.
	cause string
	// kube is the cluster's client (nil in the simulator).
	kube     kube.Client
	kubeHost string
	// pod names this replica's Pod (POD_NAME from the downward API, in
	// POD_NAMESPACE or else the release namespace); no POD_NAME: no
	// labelling.
	podNamespace, podName string
	// namespace is the release's (clusterOptions.leaseNamespace): the
	// Lease's and the status ConfigMap's.
	namespace string

	poolOnce    sync.Once
	poolApplied chan struct{}
}

// advertised is the address other replicas and operators are told: a
// wildcard listen address becomes $POD_IP.
func advertised(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || (host != "" && host != "0.0.0.0" && host != "::") {
		return addr
	}
	if ip := os.Getenv("POD_IP"); ip != "" {
		return net.JoinHostPort(ip, port)
	}
	return addr
}

// startLeadership picks the elector (a Kubernetes Lease in a cluster, a
// JetStream key-value lease in the simulator, none with
// --leader-elect=false) and puts the write gate on the command service.
func (p *plane) startLeadership(ctx context.Context, o serveOptions) error {
	name := o.nats.ReplicaName()
	if name == "" {
		name = defaultReplicaName() // options made without flags
	}
	self := leader.Holder{Replica: name, GRPCAddress: advertised(o.grpcAddress), APIAddress: advertised(o.apiAddress)}
	l := &p.lead
	l.poolApplied = make(chan struct{})
	l.namespace = o.cluster.leaseNamespace()
	l.podNamespace, l.podName = first(os.Getenv("POD_NAMESPACE"), l.namespace), os.Getenv("POD_NAME")
	if err := kube.CheckRateLimit(o.cluster.kubeQPS, o.cluster.kubeBurst); err != nil {
		return fmt.Errorf("--kube-api-qps, --kube-api-burst: %w", err)
	}
	switch {
	case o.cluster.client != nil:
		l.kube, l.kubeHost = o.cluster.client, "(given client)"
	case !o.cluster.simulated():
		cfg, err := restConfig(o.cluster.kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = o.cluster.kubeQPS, o.cluster.kubeBurst
		if p.tel != nil {
			kube.ObserveRateLimiterLatency(p.tel.Metrics.KubeRateLimited)
		}
		if l.kube, err = kube.NewClient(cfg); err != nil {
			return err
		}
		l.kubeHost = cfg.Host
	}
	switch {
	case !o.cluster.leaderElect:
		l.elector, l.cause = leader.NewAlways(self, p.log), "--leader-elect=false"
	case l.kube != nil:
		k, err := leader.NewKubeLease(leader.KubeConfig{Client: l.kube, Namespace: l.namespace, Name: o.cluster.leaseName, Self: self, Timing: leader.DefaultTiming, Log: p.log})
		if err != nil {
			return err
		}
		l.elector, l.cause = k, "Lease "+l.namespace+"/"+o.cluster.leaseName
	default:
		k, err := leader.OpenKVLease(ctx, p.store.JetStream(), leader.KVConfig{Replicas: p.store.Replicas(), Self: self, Timing: leader.DefaultTiming, Log: p.log})
		if err != nil {
			return err
		}
		l.elector, l.cause = k, "key-value lease "+leader.DefaultBucket
		if p.tel != nil && p.emb.Clustered() {
			lease := "KV_" + leader.DefaultBucket
			if err := p.tel.Metrics.ObserveStreamLeader(telemetry.InstLeaseStreamLeader, func() bool { return p.emb.StreamLeader(lease) == p.emb.Server.Name() }); err != nil {
				return err
			}
		}
	}
	// The elector's clock is the real, monotonic one, never the
	// simulator's scaled clock: a lease is real time.
	l.leadership = handlers.NewLeadership(l.elector, p.store, p.views, p.clock, p.log)
	if src, err := eventSource(o); err == nil {
		l.leadership.Source = src
	}
	p.service.Gate = l.leadership.Permit
	p.service.Fence = l.leadership.Fence
	p.service.OnFenced = l.leadership.Fenced
	if p.tel != nil {
		if err := p.tel.Metrics.ObserveLeadership(l.leadership.Epoch); err != nil {
			return err
		}
	}
	return nil
}

// leads reports whether this replica leads now (the views' writer).
func (p *plane) leads() bool { return p.lead.leadership != nil && p.lead.leadership.Leads() }

// runLeadership takes part in the election until ctx ends; each term runs
// the leader-only work. A failure of that work that is not the end of the
// term stops serve, as a failing reactor always has.
func (p *plane) runLeadership(ctx context.Context, o serveOptions, parsed *pendingPool, sc *sim.Scenario) error {
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	first := true
	p.lead.elector.Run(ctx, func(tctx context.Context) {
		c := parsed.take()
		if !first {
			// A later term reads the file again: it may have changed.
			var err error
			if c, err = p.loadPoolFile(o.config); err != nil {
				p.poolFileNotApplied(o.config, err)
				c = nil
			}
		}
		first = false
		if err := p.leadTerm(tctx, o, c, sc); err != nil && tctx.Err() == nil {
			fail(err)
		}
	})
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// leadTerm is one term: LeaderElected first (and the views that include
// it), then the Pod label, then the leader-only work until the term ends.
func (p *plane) leadTerm(ctx context.Context, o serveOptions, cfg *pool.Config, sc *sim.Scenario) error {
	ctx, depose := context.WithCancelCause(ctx)
	defer depose(nil)
	l := p.lead.leadership
	_, err := l.Elect(ctx, advertised(o.grpcAddress), advertised(o.apiAddress), p.lead.cause, func(why string) { depose(errors.New(why)) })
	if err != nil {
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, eventlog.ErrOutcomeUnknown):
			// It may have landed: the next term elects from the views
			// that hold it, for a later epoch.
			p.log.Warn("not leading: the outcome of LeaderElected's append is unknown; campaigning again", "err", err)
		default:
			p.log.Warn("not leading: LeaderElected not appended", "err", err)
		}
		return nil
	}
	defer l.StepDown()
	if p.emb.Clustered() {
		p.handOffStreamLeaders(ctx)
		// A replica down at the election comes back later: the streams
		// leave this server then.
		var handing sync.WaitGroup
		handing.Add(1)
		go func() {
			defer handing.Done()
			p.keepStreamLeadersElsewhere(ctx)
		}()
		defer handing.Wait()
	}
	if p.lead.kube != nil && p.lead.podName != "" && p.lead.podNamespace != "" {
		if err := leader.LabelLeaderPod(ctx, p.lead.kube, p.lead.podNamespace, p.lead.podName); err != nil {
			p.log.Error("the leader's pod is not labelled: cluster-autoscaler may reach a follower", "err", err)
		}
	}
	if cfg != nil {
		held := p.logHoldsPool()
		if err := p.applyPool(ctx, cfg); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if termEndingFault(err) {
				// Not the file's fault: end the term, campaign again and
				// apply it then.
				p.log.Warn("pool file not applied in this term; the term ends and the replica campaigns again", "err", err)
				return nil
			}
			if !held {
				return err // nothing to serve instead (serve_poolfile.go)
			}
			p.log.Error("pool file not applied; serving the pool the log holds until a valid file is written", "file", cfg.Source, "reason", pool.ReasonRefused, "err", err)
		}
	}
	p.lead.poolOnce.Do(func() { close(p.lead.poolApplied) })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.watchPool(ctx, o.config, o.configPoll)
	}()
	err = p.runCluster(ctx, o.cluster, sc)
	depose(nil)
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// waitForPool returns once the pool file is in the views: applied by this
// replica as leader, or by another leader (a follower's views hold its
// groups). Before that cluster-autoscaler would be told the pool has no
// groups.
func (p *plane) waitForPool(ctx context.Context, failed <-chan struct{}) error {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-p.lead.poolApplied:
			return nil
		case <-failed:
			return errors.New("stopped before the pool file was applied")
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if p.lead.leadership.Epoch() == 0 && p.poolInViews() {
			return nil
		}
	}
}

// poolInViews: a leader was elected and the views hold groups.
func (p *plane) poolInViews() bool {
	ok := false
	p.views.Read(func(st *projections.State) { ok = st.CurrentLeader().Epoch > 0 && len(st.Groups) > 0 })
	return ok
}

// handOffStreamLeaders moves the leadership of the log's stream and of the
// lease's bucket away from this replica's server, so that losing this
// process does not also stop the writes the next leader needs.
func (p *plane) handOffStreamLeaders(ctx context.Context) {
	streams := []string{p.store.Stream()}
	if _, kv := p.lead.elector.(*leader.KVLease); kv {
		streams = append(streams, "KV_"+leader.DefaultBucket)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Real time, whatever clock drives the views: JetStream's elections are.
	clk := clock.RealClock{}
	moved, err := p.emb.HandOffStreamLeaders(ctx, clk, streams...)
	if len(moved) > 0 {
		p.log.Info("moved the streams' leadership to another replica, so that losing this one leaves them standing", "streams", moved)
	}
	if err != nil && ctx.Err() == nil {
		p.log.Warn("the streams' leadership stays on the claimstream leader's server: losing it costs a JetStream election", "err", err)
	}
	if len(moved) == 0 {
		return
	}
	// The log's health may have seen the stream without a leader for a
	// moment: the term's first writes wait for it to see the new one.
	t := clk.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !p.logs.health.Status().Writable {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// streamLeadersCheck is how often a leader looks whether the streams it
// still leads can be handed to another replica.
const streamLeadersCheck = 2 * time.Second

// keepStreamLeadersElsewhere hands the streams' leadership away whenever
// this server leads them and every replica is up, until ctx ends.
func (p *plane) keepStreamLeadersElsewhere(ctx context.Context) {
	t := clock.RealClock{}.NewTicker(streamLeadersCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			p.handOffStreamLeaders(ctx)
		}
	}
}

// termEndingFault reports whether a leader's work failed because this term
// cannot write now (the log unwritable, an outcome it could not learn, a
// newer leader), not because of what it was asked to do.
func termEndingFault(err error) bool {
	return errors.Is(err, eventlog.ErrLogUnwritable) || errors.Is(err, eventlog.ErrOutcomeUnknown) ||
		errors.Is(err, eventlog.ErrFenced) || errors.Is(err, handlers.ErrDeposed)
}
