package kube

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	kevents "k8s.io/client-go/tools/events"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/projections"
)

// ReportingController is the reportingController of every Kubernetes
// Event claimstream records.
const ReportingController = "claimstream.dev/claimstream"

// maxNote is the longest note the API accepts (events.k8s.io/v1: 1kB).
const maxNote = 1024

// Event is the Kubernetes Event one claimstream event becomes: what an
// operator reads in `kubectl describe node` or `kubectl get events`.
type Event struct {
	// Type is Normal or Warning.
	Type string
	// Reason is CamelCase: the claimstream event's type (ClaimReady).
	Reason string
	// Action is what claimstream did (Boot, Shutdown, Refuse, ...).
	Action string
	// Note says it in plain words.
	Note string
	// Node is the Node the event is about.
	Node string
	// Job is the lifecycle Job it is about, if any: the Event is recorded
	// on the Job when the Node does not exist (yet, or any more).
	Job string
}

// EventFor maps one claimstream event to the Kubernetes Event an
// operator wants to see, read against the views at that event or later;
// false for an event that makes none (config, observations, ...).
func EventFor(s *projections.State, e events.Event) (Event, bool) {
	if e.Data == nil {
		return Event{}, false
	}
	ref := e.Data.Reference()
	claim := s.Claims[ref.Claim] // nil once collected, or for a claimless event
	node := ""
	if sl := s.Slots[ref.Slot]; sl != nil {
		node = sl.NodeName()
	}
	startupJob := ""
	if claim != nil {
		startupJob = claim.StartupJob
	}
	normal := func(action, note string) Event {
		return Event{Type: corev1.EventTypeNormal, Reason: string(e.Type), Action: action, Note: note, Node: node}
	}
	warning := func(action, note string) Event {
		ke := normal(action, note)
		ke.Type = corev1.EventTypeWarning
		return ke
	}
	var ke Event
	switch d := e.Data.(type) {
	case events.ClaimCreated:
		ke = normal("Claim", fmt.Sprintf("Claim %s asks for slot %s of group %s (attempt %d), requested by %s through %s; it must be ready by %s.",
			d.Claim, d.Slot, d.Group, d.Attempt, d.RequestedBy, d.Request.Call, d.DeadlineAt.UTC().Format(time.RFC3339)))
	case events.ClaimBooting:
		by := ""
		if claim != nil {
			by = ", requested by " + claim.RequestedBy
		}
		ke = normal("Boot", fmt.Sprintf("Claim %s is booting the machine of slot %s (attempt %d%s): startup Job %s.", d.Claim, d.Slot, d.Attempt, by, d.StartupJob))
		ke.Job = d.StartupJob
	case events.ClaimReady:
		took := ""
		if claim != nil && !claim.RequestedAt.IsZero() && !e.Time.Before(claim.RequestedAt) {
			took = " " + e.Time.Sub(claim.RequestedAt).Round(time.Second).String() + " after it was requested"
		}
		ke = normal("Ready", fmt.Sprintf("Claim %s is ready on node %s%s.", d.Claim, d.Node, took))
		ke.Node, ke.Job = d.Node, startupJob
	case events.ClaimFailed:
		note := fmt.Sprintf("Claim %s failed: %s", d.Claim, d.Reason)
		if d.Message != "" {
			note += ": " + d.Message
		}
		note += "."
		if d.ForceShutdown {
			note += " Its machine will be forced off."
		}
		ke = warning("Fail", note)
		ke.Job = startupJob
	case events.ScaleDownRequested:
		why := ""
		if d.Reason != "" {
			why = " (" + d.Reason + ")"
		}
		ke = normal("ScaleDown", fmt.Sprintf("Claim %s gives its machine back: scale-down requested by %s through %s%s; drain and shutdown follow.", d.Claim, d.RequestedBy, d.Request.Call, why))
	case events.ShutdownFired:
		whose := "claim " + d.Claim
		if d.Claim == "" {
			whose = "a machine no claim wants"
		}
		force := ""
		if d.Force {
			force = ", forced"
		}
		ke = normal("Shutdown", fmt.Sprintf("Shutdown Job %s fired for %s (shutdown attempt %d%s).", d.Job, whose, max(d.ShutdownAttempt, 1), force))
		ke.Job = d.Job
	case events.ShutdownAttemptLimitReached:
		ke = warning("Shutdown", fmt.Sprintf("The machine of claim %s is still up after %d shutdown Jobs; shutdowns pause until %s.", d.Claim, d.Attempts, d.PausedUntil.UTC().Format(time.RFC3339)))
	case events.UnclaimedShutdownPaused:
		ke = warning("Shutdown", fmt.Sprintf("A machine no claim wants is still up after %d shutdown Jobs; shutdowns pause until %s.", d.Attempts, d.PausedUntil.UTC().Format(time.RFC3339)))
	case events.HostJoinRefused:
		ke = warning("Refuse", fmt.Sprintf("Node %s joined unexpected and was refused: %s. It is cordoned and tainted claimstream.dev/refused.", d.Node, d.Why))
		ke.Node = d.Node
	case events.DrainTimedOut:
		left := ""
		if len(d.Remaining) > 0 {
			left = ": " + strings.Join(d.Remaining, ", ")
		}
		ke = warning("Drain", fmt.Sprintf("The drain of node %s passed its timeout with %d pods left%s; policy %s.", d.Node, len(d.Remaining), left, d.Policy))
		ke.Node = d.Node
	default:
		return Event{}, false
	}
	if len(ke.Note) > maxNote {
		// Cut on a byte; drop a rune the cut split.
		ke.Note = strings.ToValidUTF8(ke.Note[:maxNote-3], "") + "..."
	}
	return ke, true
}

// EventRecorderMetrics count the Kubernetes writes that failed.
type EventRecorderMetrics interface {
	KubeWriteFailed(what string)
}

// EventRecorderConfig configure an EventRecorder.
type EventRecorderConfig struct {
	Client Client
	// Cluster is the informer caches the Node and Job are looked up in.
	Cluster *Cluster
	Views   *projections.Runner
	Log     *slog.Logger
	Metrics EventRecorderMetrics
	// PoolFile, when set with Pod, is the pool file's state: each file
	// not applied becomes a Warning Event on serve's Pod (PoolFileRefused),
	// and the next one applied a Normal one (PoolFileApplied).
	PoolFile *pool.FileReport
	// Pod is serve's own Pod (namespace and name).
	Pod types.NamespacedName
}

// EventRecorder records Kubernetes Events (events.k8s.io/v1, through
// client-go's EventBroadcaster, which aggregates repeats into series and
// retries) for the claimstream events the views fold while it runs: the
// log first, then the Kubernetes Event (append, then act). History folded
// before Run is never recorded again. Run it where the reactors run.
type EventRecorder struct {
	cfg EventRecorderConfig
}

// NewEventRecorder returns a recorder; Run starts it.
func NewEventRecorder(cfg EventRecorderConfig) *EventRecorder {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &EventRecorder{cfg: cfg}
}

// Run records events until ctx ends.
func (r *EventRecorder) Run(ctx context.Context) error {
	stop, err := r.Start(ctx)
	if err != nil {
		return err
	}
	<-ctx.Done()
	stop()
	return nil
}

// Start records every event folded from now on until ctx ends or stop is
// called.
func (r *EventRecorder) Start(ctx context.Context) (stop func(), err error) {
	b := kevents.NewBroadcaster(&reportingSink{EventSinkImpl: kevents.EventSinkImpl{Interface: r.cfg.Client.EventsV1()}, log: r.cfg.Log, metrics: r.cfg.Metrics})
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		return nil, fmt.Errorf("kubernetes events: %w", err)
	}
	rec := b.NewRecorder(kscheme.Scheme, ReportingController)
	unsubscribe := r.cfg.Views.Subscribe(func(e events.Event) { r.record(rec, e) })
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.recordPoolFile(ctx, rec)
	}()
	return func() { unsubscribe(); cancel(); <-done; b.Shutdown() }, nil
}

// record turns one folded event into a Kubernetes Event. It does not
// block: the recorder queues the write.
func (r *EventRecorder) record(rec kevents.EventRecorder, e events.Event) {
	var ke Event
	var ok bool
	r.cfg.Views.Read(func(s *projections.State) { ke, ok = EventFor(s, e) })
	if !ok {
		return
	}
	regarding, related := r.objects(ke)
	if regarding == nil {
		r.cfg.Log.Debug("kubernetes event not recorded: neither its node nor a lifecycle job exists", "reason", ke.Reason, "node", ke.Node, "seq", e.Seq)
		return
	}
	rec.Eventf(regarding, related, ke.Type, ke.Reason, ke.Action, "%s", ke.Note)
	r.cfg.Log.Debug("kubernetes event recorded", "reason", ke.Reason, "on", objectName(regarding), "seq", e.Seq)
}

// objects picks what the Event is about: the Node when it exists (with the
// Job as the related object), else the lifecycle Job, else nothing.
func (r *EventRecorder) objects(ke Event) (regarding, related runtime.Object) {
	var job runtime.Object
	if ke.Job != "" {
		job = r.job(ke.Job)
	}
	if ke.Node != "" {
		if n, ok := r.cfg.Cluster.node(ke.Node); ok {
			return n, job
		}
	}
	return job, nil
}

// objectName is "Kind/name" of a Node or a Job.
func objectName(o runtime.Object) string {
	switch x := o.(type) {
	case *corev1.Node:
		return "Node/" + x.Name
	case *batchv1.Job:
		return "Job/" + x.Namespace + "/" + x.Name
	}
	return fmt.Sprintf("%T", o)
}

// job is the cached Job, or a reference by name to one about to be
// created (a startup Job follows its ClaimBooting).
func (r *EventRecorder) job(name string) runtime.Object {
	c := r.cfg.Cluster
	if o, ok, err := c.jobs.GetStore().GetByKey(c.namespace + "/" + name); err == nil && ok {
		if j, ok := o.(*batchv1.Job); ok {
			return j
		}
	}
	return &batchv1.Job{TypeMeta: metav1.TypeMeta{Kind: "Job", APIVersion: "batch/v1"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.namespace}}
}

// reportingSink is the API sink that says when a write fails: in the log
// and in the metrics (the broadcaster itself only tells klog).
type reportingSink struct {
	kevents.EventSinkImpl
	log     *slog.Logger
	metrics EventRecorderMetrics
}

func (s *reportingSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	out, err := s.EventSinkImpl.Create(ctx, e)
	s.report(e, err)
	return out, err
}

func (s *reportingSink) Patch(ctx context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	out, err := s.EventSinkImpl.Patch(ctx, e, data)
	if err != nil && !apierrors.IsNotFound(err) { // a series whose Event expired is created again
		s.report(e, err)
	}
	return out, err
}

func (s *reportingSink) report(e *eventsv1.Event, err error) {
	if err == nil || apierrors.IsAlreadyExists(err) {
		return
	}
	s.log.Warn("kubernetes event not recorded (check the RBAC: events.k8s.io events create and patch)", "reason", e.Reason, "object", e.Regarding.Kind+"/"+e.Regarding.Name, "namespace", e.Namespace, "err", err)
	if s.metrics != nil {
		s.metrics.KubeWriteFailed("event")
	}
}
