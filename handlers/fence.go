package handlers

import (
	"context"

	"github.com/claimstream/claimstream/events"
)

// Fenced wraps a Cluster so that every change it makes to the cluster
// (Jobs, cordon, taints, evictions, pod and Node deletes) is preceded by
// prove (Leadership.Prove): a leader deposed while it was stalled never
// acts on a decision, even one whose append landed before it stalled.
// Reads go straight through.
func Fenced(c Cluster, prove func(context.Context) error) Cluster {
	f := fencedCluster{Cluster: c, prove: prove}
	if w, ok := c.(ObjectWatcher); ok {
		return fencedWatcher{fencedCluster: f, ObjectWatcher: w}
	}
	return f
}

type fencedCluster struct {
	Cluster
	prove func(context.Context) error
}

type fencedWatcher struct {
	fencedCluster
	ObjectWatcher
}

func (f fencedCluster) CreateJob(ctx context.Context, req JobRequest) (bool, error) {
	if err := f.prove(ctx); err != nil {
		return false, err
	}
	return f.Cluster.CreateJob(ctx, req)
}

func (f fencedCluster) DeleteJob(ctx context.Context, name string) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.DeleteJob(ctx, name)
}

func (f fencedCluster) Cordon(ctx context.Context, node string) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.Cordon(ctx, node)
}

func (f fencedCluster) Uncordon(ctx context.Context, node string) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.Uncordon(ctx, node)
}

func (f fencedCluster) DeleteNode(ctx context.Context, node string) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.DeleteNode(ctx, node)
}

func (f fencedCluster) ApplySlotConfig(ctx context.Context, node string, labels map[string]string, taints []events.Taint) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.ApplySlotConfig(ctx, node, labels, taints)
}

func (f fencedCluster) AddNodeTaint(ctx context.Context, node string, t events.Taint) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.AddNodeTaint(ctx, node, t)
}

func (f fencedCluster) RemoveNodeTaint(ctx context.Context, node, key string) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.RemoveNodeTaint(ctx, node, key)
}

func (f fencedCluster) Evict(ctx context.Context, pod PodView) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.Evict(ctx, pod)
}

func (f fencedCluster) DeletePod(ctx context.Context, pod PodView) error {
	if err := f.prove(ctx); err != nil {
		return err
	}
	return f.Cluster.DeletePod(ctx, pod)
}
