package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// LeaseClient is the part of the Kubernetes API a KubeLease calls
// (kube.Client and client-go's clientset have it).
type LeaseClient interface {
	CoordinationV1() coordinationv1client.CoordinationV1Interface
}

// KubeConfig configures a Kubernetes Lease.
type KubeConfig struct {
	Client    LeaseClient
	Namespace string
	Name      string
	// Self.Replica is the Lease's holder identity: the replica's stable
	// name, so a replica restarted after a crash renews its own lease at
	// once instead of waiting it out.
	Self   Holder
	Timing Timing
	// Clock measures the renewals on this replica for Leading (client-go
	// keeps its own clock for the election itself).
	Clock clock.PassiveClock
	Log   *slog.Logger
}

// KubeLease is an Elector on a coordination.k8s.io Lease, through
// client-go's leader election.
type KubeLease struct {
	cfg KubeConfig
	*term
}

// NewKubeLease returns the Lease elector.
func NewKubeLease(cfg KubeConfig) (*KubeLease, error) {
	if cfg.Self.Replica == "" {
		return nil, errors.New("leader Lease: the replica has no name")
	}
	if cfg.Client == nil || cfg.Namespace == "" || cfg.Name == "" {
		return nil, errors.New("leader Lease: needs a client, a namespace and a name")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	cfg.Timing = cfg.Timing.withDefaults()
	return &KubeLease{cfg: cfg, term: &term{clock: cfg.Clock, deadline: cfg.Timing.RenewDeadline, log: cfg.Log, self: cfg.Self.Replica, timing: cfg.Timing}}, nil
}

// Identity is the Lease holder identity of this replica.
func (k *KubeLease) Identity() string { return k.cfg.Self.Replica }

// Leading reports a Lease renewed within the renew deadline.
func (k *KubeLease) Leading() bool { return k.valid() }

// Leader is the holder last observed (only its name: the Lease holds no
// addresses; the views' LeaderElected has them).
func (k *KubeLease) Leader() Holder { return k.current() }

// Run campaigns until ctx ends; see Elector.
func (k *KubeLease) Run(ctx context.Context, lead func(context.Context)) {
	for ctx.Err() == nil {
		if err := k.runOnce(ctx, lead); err != nil {
			k.cfg.Log.Error("leader election", "err", err)
			return
		}
		wait, ok := k.cfg.Clock.(clock.Clock)
		if !ok {
			wait = clock.RealClock{}
		}
		k.pause(ctx, wait)
	}
}

// runOnce is one client-go election: campaign, lead until the Lease is
// lost, release it when ctx ends.
func (k *KubeLease) runOnce(ctx context.Context, lead func(context.Context)) error {
	lock := &renewalLock{
		Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: k.cfg.Namespace, Name: k.cfg.Name},
			Client:     k.cfg.Client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: k.cfg.Self.Replica},
		},
		clock: k.cfg.Clock,
		term:  k.term,
	}
	lost := make(chan string, 1)
	termDone := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   k.cfg.Timing.LeaseDuration,
		RenewDeadline:   k.cfg.Timing.RenewDeadline,
		RetryPeriod:     k.cfg.Timing.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            k.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				// client-go does not wait for this callback; the term
				// does, and Run waits for the term.
				defer close(termDone)
				k.term.lead(ctx, lead, lctxLost(lctx, lost))
			},
			OnStoppedLeading: func() {
				select {
				case lost <- fmt.Sprintf("the Lease %s/%s was not renewed within %s", k.cfg.Namespace, k.cfg.Name, k.cfg.Timing.RenewDeadline):
				default:
				}
			},
			OnNewLeader: func(id string) { k.observed(Holder{Replica: id}) },
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	le.Run(ctx)
	if lock.acquired.Load() {
		// client-go started OnStartedLeading once it held the Lease.
		<-termDone
	}
	return nil
}

// lctxLost turns the end of client-go's leading context into a reason on
// lost (the first reason sent wins).
func lctxLost(lctx context.Context, lost chan string) <-chan string {
	out := make(chan string, 1)
	go func() {
		select {
		case why := <-lost:
			out <- why
		case <-lctx.Done():
			select {
			case why := <-lost:
				out <- why
			default:
				out <- "the Lease was not renewed"
			}
		}
	}()
	return out
}

// renewalLock records, on this replica's clock, when each write that made
// or kept this replica the holder began: Leading counts from there.
type renewalLock struct {
	resourcelock.Interface
	clock clock.PassiveClock
	term  *term
	// acquired: a write made this replica the holder.
	acquired atomic.Bool
}

func (l *renewalLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	began := l.clock.Now()
	err := l.Interface.Create(ctx, r)
	l.wrote(began, r, err)
	return err
}

func (l *renewalLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	began := l.clock.Now()
	err := l.Interface.Update(ctx, r)
	l.wrote(began, r, err)
	return err
}

func (l *renewalLock) wrote(began time.Time, r resourcelock.LeaderElectionRecord, err error) {
	if err != nil || r.HolderIdentity != l.Identity() {
		return
	}
	l.term.renewed(began)
	l.acquired.Store(true)
}
