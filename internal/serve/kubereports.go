package serve

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/claimstream/claimstream/handlers/kube"
)

// withKubeReports runs the Kubernetes Events recorder and the status
// ConfigMap writer next to run (the reactors): only on the replica that
// leads, so one writer reports each move once. The ConfigMap is in the
// release namespace, beside the Lease, whatever namespace the Jobs are in.
func (p *plane) withKubeReports(cl *kube.Cluster, o clusterOptions, run func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var metrics kube.EventRecorderMetrics
		if p.tel != nil {
			metrics = p.tel.Metrics
		}
		// Subscribed before the reactors start: every move they log from
		// now on is reported; the history before is not.
		rec := kube.NewEventRecorder(kube.EventRecorderConfig{Client: cl.Client(), Cluster: cl, Views: p.views, Log: p.log, Metrics: metrics,
			PoolFile: &p.poolFile, Pod: types.NamespacedName{Namespace: p.lead.podNamespace, Name: p.lead.podName}})
		stop, err := rec.Start(ctx)
		if err != nil {
			return fmt.Errorf("kubernetes events: %w", err)
		}
		defer stop()
		status := kube.NewStatusWriter(kube.StatusWriterConfig{
			Client: cl.Client(), Namespace: p.lead.namespace, Views: p.views, Clock: p.clock, Interval: o.statusInterval,
			// --replica-name, once serve has it, names the leader here.
			Leader: kube.ReplicaName(),
			Log:    p.log, Metrics: metrics,
			PoolFile: &p.poolFile,
		})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := status.Run(ctx); err != nil {
				p.log.Error("status ConfigMap writer stopped", "err", err)
			}
		}()
		p.log.Info("reporting to Kubernetes", "events", "events.k8s.io/v1 on Nodes, Jobs and the pool file (serve's Pod)", "status", p.lead.namespace+"/"+kube.StatusConfigMap, "every", status.Interval())
		err = run(ctx)
		cancel()
		wg.Wait()
		return err
	}
}
