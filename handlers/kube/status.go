package kube

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/projections"
)

// The status ConfigMap: what claimstream is doing, readable with kubectl
// (`kubectl -n <ns> get configmap claimstream-status -o yaml`), like
// cluster-autoscaler's cluster-autoscaler-status.
const (
	StatusConfigMap = "claimstream-status"
	// StatusKey is the data key holding the status (YAML).
	StatusKey = "status"
	// StatusUpdatedAnnotation is when the status was last written.
	StatusUpdatedAnnotation = "claimstream.dev/last-updated"

	// DefaultStatusInterval bounds the writes: at most one per interval,
	// however fast the log moves.
	DefaultStatusInterval = 10 * time.Second
	// statusResync re-reads the views this often without a change, for
	// what moves with time alone (a failure leaves the recent window).
	statusResync = time.Minute
)

// Status is the content of the status ConfigMap.
type Status struct {
	// Leader is the replica that runs the reactors and writes this.
	Leader string `json:"leader"`
	// Seq is the log sequence the views reflect.
	Seq    uint64        `json:"seq"`
	Groups []GroupStatus `json:"groups"`
	// PoolFile is what became of the last pool file read: applied, or
	// not applied and why, while the views keep the log's pool.
	PoolFile *pool.FileState `json:"poolFile,omitempty"`
}

// GroupStatus is one group's line.
type GroupStatus struct {
	Name   string `json:"name"`
	Scaler string `json:"scaler"`
	// Target is the live claims that want a machine (cluster-autoscaler's
	// target size); Live counts every live claim, scale-downs included.
	Target int `json:"target"`
	Min    int `json:"min"`
	Max    int `json:"max"`
	Live   int `json:"live"`
	// FailedRecently counts claims that failed within the window
	// cluster-autoscaler is told about them (5m).
	FailedRecently int `json:"failedRecently"`
	// Slots counts the slots by state (off, resting, pending, booting,
	// ready, draining, decommissioned); states with none are left out.
	Slots map[string]int `json:"slots,omitempty"`
	// LastDecision is the built-in scaler's last decision (builtin groups).
	LastDecision *projections.ScaleDecided `json:"lastDecision,omitempty"`
}

// StatusOf reads the status from the views at now.
func StatusOf(s *projections.State, leader string, now time.Time) Status {
	st := Status{Leader: leader, Seq: s.Seq, Groups: []GroupStatus{}}
	for name, g := range s.Groups {
		if g.Retired {
			continue
		}
		gs := GroupStatus{
			Name: name, Scaler: g.Spec.Scaler, Target: s.TargetSize(name), Min: g.Spec.MinSize, Max: s.MaxSize(name),
			Live: len(s.LiveClaims(name)), Slots: map[string]int{}, LastDecision: g.LastDecision,
		}
		if gs.Scaler == "" {
			gs.Scaler = "cluster-autoscaler"
		}
		for _, slot := range g.Slots {
			if sl := s.Slots[slot]; sl != nil && !sl.Retired {
				gs.Slots[string(s.SlotState(slot, now))]++
			}
		}
		for _, c := range s.Claims {
			if c.Group == name && c.Phase == projections.PhaseFailed && c.FinishedAt != nil && now.Sub(*c.FinishedAt) <= projections.RecentFailureWindow {
				gs.FailedRecently++
			}
		}
		st.Groups = append(st.Groups, gs)
	}
	sort.Slice(st.Groups, func(i, j int) bool { return st.Groups[i].Name < st.Groups[j].Name })
	return st
}

// ReplicaName is who this replica is in the status: $POD_NAME (the
// StatefulSet's pod), else the host name.
func ReplicaName() string {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	h, _ := os.Hostname()
	return h
}

// StatusWriterConfig configure a StatusWriter.
type StatusWriterConfig struct {
	Client    Client
	Namespace string
	Views     *projections.Runner
	Clock     clock.Clock
	// Interval is the least time between two writes (default
	// DefaultStatusInterval).
	Interval time.Duration
	Leader   string
	Log      *slog.Logger
	Metrics  EventRecorderMetrics
	// PoolFile, when set, is the pool file's state, written with the rest.
	PoolFile *pool.FileReport
}

// StatusWriter keeps the status ConfigMap current: written when the views
// change, at most once per Interval. Run it where the reactors run.
type StatusWriter struct {
	cfg StatusWriterConfig
}

// NewStatusWriter returns a writer; Run starts it.
func NewStatusWriter(cfg StatusWriterConfig) *StatusWriter {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultStatusInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &StatusWriter{cfg: cfg}
}

// Run writes the status until ctx ends. A write that fails is logged,
// counted, and tried again an interval later.
func (w *StatusWriter) Run(ctx context.Context) error {
	var last string
	var lastWrite time.Time
	for {
		changed := w.cfg.Views.Changed() // before reading: a change during the write is not lost
		poolChanged := w.cfg.PoolFile.Changed()
		data, err := w.render()
		if err != nil {
			return err
		}
		if data != last {
			if wait := lastWrite.Add(w.cfg.Interval).Sub(w.cfg.Clock.Now()); !lastWrite.IsZero() && wait > 0 {
				// Too soon: wait out the interval, then write what the
				// views say by then (the changes in between coalesce).
				if !w.sleep(ctx, wait, nil, nil) {
					return nil
				}
				continue
			}
			lastWrite = w.cfg.Clock.Now()
			if err := w.write(ctx, data); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				w.cfg.Log.Warn("status ConfigMap not written; trying again (check the RBAC: configmaps get, create and update)", "configmap", w.cfg.Namespace+"/"+StatusConfigMap, "retry_in", w.cfg.Interval, "err", err)
				if w.cfg.Metrics != nil {
					w.cfg.Metrics.KubeWriteFailed("status")
				}
				continue
			}
			last = data
			w.cfg.Log.Debug("status ConfigMap written", "configmap", w.cfg.Namespace+"/"+StatusConfigMap)
		}
		if !w.sleep(ctx, statusResync, changed, poolChanged) {
			return nil
		}
	}
}

// sleep waits for d on the clock, or until wake or poolWake is closed;
// false when ctx ended. The timer is stopped on the way out, so a test's fake clock
// has a waiter exactly while the writer waits.
func (w *StatusWriter) sleep(ctx context.Context, d time.Duration, wake, poolWake <-chan struct{}) bool {
	t := w.cfg.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-wake:
	case <-poolWake:
	case <-t.C():
	}
	return true
}

func (w *StatusWriter) render() (string, error) {
	var st Status
	now := w.cfg.Clock.Now()
	w.cfg.Views.Read(func(s *projections.State) { st = StatusOf(s, w.cfg.Leader, now) })
	st.PoolFile = w.cfg.PoolFile.State()
	b, err := yaml.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("status: %w", err)
	}
	return string(b), nil
}

// write creates or updates the ConfigMap with data.
func (w *StatusWriter) write(ctx context.Context, data string) error {
	cms := w.cfg.Client.CoreV1().ConfigMaps(w.cfg.Namespace)
	stamp := w.cfg.Clock.Now().UTC().Format(time.RFC3339)
	cm, err := cms.Get(ctx, StatusConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: StatusConfigMap, Namespace: w.cfg.Namespace,
				Labels:      map[string]string{"app.kubernetes.io/name": "claimstream", "app.kubernetes.io/component": "status"},
				Annotations: map[string]string{StatusUpdatedAnnotation: stamp}},
			Data: map[string]string{StatusKey: data},
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create configmap %s: %w", StatusConfigMap, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("get configmap %s: %w", StatusConfigMap, err)
	}
	if cm.Data[StatusKey] == data {
		return nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Data[StatusKey] = data
	cm.Annotations[StatusUpdatedAnnotation] = stamp
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update configmap %s: %w", StatusConfigMap, err)
	}
	return nil
}

// Interval is the least time between two writes.
func (w *StatusWriter) Interval() time.Duration { return w.cfg.Interval }
