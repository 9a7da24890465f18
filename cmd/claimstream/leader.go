package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaderOptions configure leader election in a cluster.
type leaderOptions struct {
	namespace string
	name      string
	identity  string
	lease     time.Duration
	renew     time.Duration
	retry     time.Duration
}

// runAsLeader runs lead while this process holds the Lease, and returns when
// ctx ends or leadership is lost (the caller exits: a stale leader must not
// go on acting; its appends would fail their expectations anyway).
func runAsLeader(ctx context.Context, cs kubernetes.Interface, o leaderOptions, log *slog.Logger, lead func(context.Context)) error {
	if o.identity == "" {
		host, _ := os.Hostname()
		o.identity = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  v1.ObjectMeta{Namespace: o.namespace, Name: o.name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: o.identity},
	}
	lost := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   o.lease,
		RenewDeadline:   o.renew,
		RetryPeriod:     o.retry,
		ReleaseOnCancel: true,
		Name:            o.name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				log.Info("leading", "lease", o.namespace+"/"+o.name, "identity", o.identity)
				lead(ctx)
			},
			OnStoppedLeading: func() { close(lost) },
			OnNewLeader: func(id string) {
				if id != o.identity {
					log.Info("following", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	<-lost
	return fmt.Errorf("lost the lease %s/%s", o.namespace, o.name)
}
