// Package machines plays the physical machines behind claimstream's slots on
// a kwok cluster. It watches the lifecycle Jobs claimstream creates (labelled
// claimstream.dev/operation): when a startup Job completes, the slot's
// machine "boots" and registers its Node (annotated for kwok, with the slot's
// providerID, capacity and readiness taints) after a delay; kwok makes it
// Ready and the model removes the readiness taints later, like a CNI agent.
// When a shutdown Job completes the machine powers off: kwok stops managing
// the Node and its Ready condition goes False, as the node lifecycle
// controller would set it once the kubelet is gone.
//
// Knobs per slot inject failures: a machine that never boots, boots late, a
// shutdown that exits 0 but leaves the machine up, and a machine that
// vanishes (PowerOff without a Job).
//
// PowerJobs plays the kubelet for power drivers' Jobs: their container runs
// as a process of the test environment.
package machines

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Labels claimstream puts on its lifecycle Jobs.
const (
	LabelClaim     = "claimstream.dev/claim"
	LabelSlot      = "claimstream.dev/slot"
	LabelAttempt   = "claimstream.dev/attempt"
	LabelOperation = "claimstream.dev/operation"
	// AnnotationSlot carries the slot's full name; the LabelSlot label is
	// shortened with a digest past 63 characters.
	AnnotationSlot = "claimstream.dev/slot"

	// KwokAnnotation marks a Node kwok manages (it is Ready within ~1s).
	KwokAnnotation = "kwok.x-k8s.io/node"
)

// Knobs are a slot machine's behaviour.
type Knobs struct {
	// NeverBoots: the startup Job succeeds but no Node ever registers.
	NeverBoots bool
	// BootDelay: from the startup Job's completion to the Node's registration.
	BootDelay time.Duration
	// ReadyDelay: from registration to the removal of the readiness taints.
	ReadyDelay time.Duration
	// ShutdownLeavesUp: the shutdown Job exits 0 but the machine stays on.
	ShutdownLeavesUp bool
	// ShutdownDelay: from the shutdown Job's completion to power-off.
	ShutdownDelay time.Duration
}

// Slot is one machine.
type Slot struct {
	Name       string
	ProviderID string // default homelab://<name>
	// NodeName: the machine registers its Node under this name (default:
	// the slot's), like a cloud instance named by its provider. The startup
	// Job reports it with ProviderID and an instance id in its pod's
	// termination message, as a provisioning Job does.
	NodeName string
	Labels   map[string]string
	Capacity corev1.ResourceList // default cpu 8, memory 32Gi, pods 110
	// ReadinessTaints the Node registers with; removed after ReadyDelay.
	ReadinessTaints []corev1.Taint
}

// Event is something the model did, for the test log and assertions.
type Event struct {
	At   time.Time
	Slot string
	What string // "boot", "registered", "taints-removed", "power-off", "ignored-boot", "left-up"
	Job  string
}

// Model is the set of machines.
type Model struct {
	client kubernetes.Interface
	ns     string
	log    *slog.Logger

	mu       sync.Mutex
	slots    map[string]*machine
	defaults Knobs
	handled  map[types.UID]bool
	events   []Event
	// bySlot and changed are per slot, so a wait for one slot's event
	// reads and wakes for that slot alone (a pool of 10,000 machines makes
	// tens of thousands of events).
	bySlot  map[string][]Event
	changed map[string]chan struct{}
}

type machine struct {
	Slot
	knobs Knobs
	on    bool
	gen   int // bumped by every power transition; stale timers check it
}

// node is the name of the slot's Node.
func (s Slot) node() string {
	if s.NodeName != "" {
		return s.NodeName
	}
	return s.Name
}

// NodeOf is the name the slot's machine registers its Node under.
func (m *Model) NodeOf(slot string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc := m.slots[slot]; mc != nil {
		return mc.node()
	}
	return slot
}

// New returns a model of slots. Jobs are watched in namespace ns.
func New(client kubernetes.Interface, ns string, slots []Slot, defaults Knobs, log *slog.Logger) *Model {
	if log == nil {
		log = slog.Default()
	}
	m := &Model{client: client, ns: ns, log: log, slots: map[string]*machine{}, defaults: defaults, handled: map[types.UID]bool{}, bySlot: map[string][]Event{}, changed: map[string]chan struct{}{}}
	for _, s := range slots {
		if s.ProviderID == "" {
			s.ProviderID = "homelab://" + s.Name
		}
		if s.Capacity == nil {
			s.Capacity = corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("8"),
				corev1.ResourceMemory: resource.MustParse("32Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			}
		}
		m.slots[s.Name] = &machine{Slot: s, knobs: defaults}
	}
	return m
}

// SetKnobs changes a slot machine's behaviour from now on.
func (m *Model) SetKnobs(slot string, k Knobs) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mc := m.slots[slot]; mc != nil {
		mc.knobs = k
	}
}

// On reports whether the slot's machine is powered on.
func (m *Model) On(slot string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	mc := m.slots[slot]
	return mc != nil && mc.on
}

// Events returns what happened so far.
func (m *Model) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events...)
}

// EventsOf returns the events of one slot.
func (m *Model) EventsOf(slot string) []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.bySlot[slot]...)
}

func (m *Model) record(slot, what, job string) {
	m.mu.Lock()
	e := Event{At: time.Now(), Slot: slot, What: what, Job: job}
	m.events = append(m.events, e)
	m.bySlot[slot] = append(m.bySlot[slot], e)
	if ch := m.changed[slot]; ch != nil {
		close(ch)
		delete(m.changed, slot)
	}
	m.mu.Unlock()
	m.log.Info("machine", "slot", slot, "event", what, "job", job)
}

// Run watches the lifecycle Jobs until ctx ends.
func (m *Model) Run(ctx context.Context) error {
	f := informers.NewSharedInformerFactoryWithOptions(m.client, 0, informers.WithNamespace(m.ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = LabelOperation }))
	inf := f.Batch().V1().Jobs().Informer()
	handle := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			m.onJob(ctx, j)
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, n any) { handle(n) },
	})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	<-ctx.Done()
	f.Shutdown()
	return nil
}

func completed(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func (m *Model) onJob(ctx context.Context, j *batchv1.Job) {
	if !completed(j) {
		return
	}
	slot := SlotOf(j)
	op := j.Labels[LabelOperation]
	m.mu.Lock()
	if m.handled[j.UID] {
		m.mu.Unlock()
		return
	}
	m.handled[j.UID] = true
	mc := m.slots[slot]
	if mc == nil {
		m.mu.Unlock()
		m.log.Warn("machine: a lifecycle Job for an unknown slot", "job", j.Name, "slot", slot)
		return
	}
	k := mc.knobs
	gen := mc.gen
	s := mc.Slot
	m.mu.Unlock()
	switch op {
	case "startup":
		if s.NodeName != "" {
			if err := m.report(ctx, j.Name, s); err != nil {
				m.log.Error("machine: report the instance", "slot", slot, "job", j.Name, "err", err)
			}
		}
		if k.NeverBoots {
			m.record(slot, "ignored-boot", j.Name)
			return
		}
		m.record(slot, "boot", j.Name)
		m.after(ctx, k.BootDelay, func() {
			if !m.sameGen(slot, gen) {
				return
			}
			if err := m.PowerOn(ctx, slot); err != nil {
				m.log.Error("machine: power on", "slot", slot, "err", err)
			}
		})
	case "shutdown":
		if k.ShutdownLeavesUp {
			m.record(slot, "left-up", j.Name)
			return
		}
		m.after(ctx, k.ShutdownDelay, func() {
			if err := m.powerOff(ctx, slot, j.Name); err != nil {
				m.log.Error("machine: power off", "slot", slot, "err", err)
			}
		})
	}
}

func (m *Model) sameGen(slot string, gen int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.slots[slot] != nil && m.slots[slot].gen == gen
}

// after runs fn once d has passed unless ctx ends first. It holds a
// runtime timer, not a goroutine, while it waits: a pool of 10,000
// machines booting at once waits on 10,000 timers.
func (m *Model) after(ctx context.Context, d time.Duration, fn func()) {
	var stop func() bool
	ready := make(chan struct{}) // stop is set
	t := time.AfterFunc(d, func() {
		<-ready
		stop()
		if ctx.Err() == nil {
			fn()
		}
	})
	stop = context.AfterFunc(ctx, func() { t.Stop() })
	close(ready)
}

// PowerOn switches the slot's machine on (as by hand, or after a startup
// Job): its Node registers with the readiness taints, kwok makes it Ready,
// and the taints go after ReadyDelay. A stale NotReady Node of the slot is
// replaced.
func (m *Model) PowerOn(ctx context.Context, slot string) error {
	m.mu.Lock()
	mc := m.slots[slot]
	if mc == nil {
		m.mu.Unlock()
		return fmt.Errorf("unknown slot %q", slot)
	}
	if mc.on {
		m.mu.Unlock()
		return nil
	}
	mc.on = true
	mc.gen++
	gen := mc.gen
	s := mc.Slot
	k := mc.knobs
	m.mu.Unlock()
	name := s.node()

	nodes := m.client.CoreV1().Nodes()
	if old, err := nodes.Get(ctx, name, metav1.GetOptions{}); err == nil {
		if old.Annotations[KwokAnnotation] == "" {
			// The Node of an earlier power cycle that nobody removed.
			if err := nodes.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err := m.waitGone(ctx, name); err != nil {
				return err
			}
		} else {
			m.record(slot, "registered", "")
			return nil
		}
	}
	labels := map[string]string{
		"kubernetes.io/hostname": hostname(name),
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range s.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				KwokAnnotation:                 "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		Spec: corev1.NodeSpec{ProviderID: s.ProviderID, Taints: append([]corev1.Taint(nil), s.ReadinessTaints...)},
		Status: corev1.NodeStatus{
			Capacity:    s.Capacity,
			Allocatable: s.Capacity,
			NodeInfo:    corev1.NodeSystemInfo{KubeletVersion: "v1.35.4-kwok", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
	if _, err := nodes.Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("register node %s: %w", name, err)
	}
	m.record(slot, "registered", "")
	if len(s.ReadinessTaints) > 0 {
		m.after(ctx, k.ReadyDelay, func() {
			if !m.sameGen(slot, gen) {
				return
			}
			if err := m.removeTaints(ctx, name, s.ReadinessTaints); err != nil {
				m.log.Error("machine: remove readiness taints", "slot", slot, "err", err)
				return
			}
			m.record(slot, "taints-removed", "")
		})
	}
	return nil
}

func (m *Model) waitGone(ctx context.Context, name string) error {
	for {
		_, err := m.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *Model) removeTaints(ctx context.Context, node string, drop []corev1.Taint) error {
	for range 10 {
		n, err := m.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var keep []corev1.Taint
		for _, t := range n.Spec.Taints {
			gone := false
			for _, d := range drop {
				if t.Key == d.Key && t.Effect == d.Effect {
					gone = true
				}
			}
			if !gone {
				keep = append(keep, t)
			}
		}
		if len(keep) == len(n.Spec.Taints) {
			return nil
		}
		n.Spec.Taints = keep
		_, err = m.client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		return err
	}
	return fmt.Errorf("node %s: too many conflicts", node)
}

// PowerOff switches the slot's machine off without a shutdown Job (a machine
// that vanishes: power cut, hardware fault).
func (m *Model) PowerOff(ctx context.Context, slot string) error {
	return m.powerOff(ctx, slot, "")
}

func (m *Model) powerOff(ctx context.Context, slot, job string) error {
	m.mu.Lock()
	mc := m.slots[slot]
	if mc == nil {
		m.mu.Unlock()
		return fmt.Errorf("unknown slot %q", slot)
	}
	mc.on = false
	mc.gen++
	name := mc.node()
	m.mu.Unlock()
	// kwok lets go of the Node first, so that it does not make it Ready again.
	patch := []byte(`{"metadata":{"annotations":{"` + KwokAnnotation + `":null}}}`)
	_, err := m.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		m.record(slot, "power-off", job)
		return nil
	}
	if err != nil {
		return err
	}
	if err := m.setNotReady(ctx, name); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	m.record(slot, "power-off", job)
	return nil
}

// setNotReady sets the Node's Ready condition to Unknown, as the node
// lifecycle controller does when the kubelet stops posting status.
func (m *Model) setNotReady(ctx context.Context, node string) error {
	now := metav1.Now()
	cond := corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionUnknown,
		Reason: "NodeStatusUnknown", Message: "machine powered off (e2e machine model)",
		LastHeartbeatTime: now, LastTransitionTime: now,
	}
	b, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{cond}}})
	// conditions is a patchMergeKey=type list: a strategic merge patch
	// replaces only the Ready entry.
	_, err := m.client.CoreV1().Nodes().PatchStatus(ctx, node, b)
	return err
}

// WaitEvent waits until the slot's machine has recorded what (after index
// from, an index into EventsOf(slot)).
func (m *Model) WaitEvent(ctx context.Context, slot, what string, from int) (Event, error) {
	for {
		m.mu.Lock()
		ch := m.changed[slot]
		if ch == nil {
			ch = make(chan struct{})
			m.changed[slot] = ch
		}
		evs := append([]Event(nil), m.bySlot[slot]...)
		m.mu.Unlock()
		for i := from; i < len(evs); i++ {
			if evs[i].What == what {
				return evs[i], nil
			}
		}
		select {
		case <-ctx.Done():
			return Event{}, fmt.Errorf("slot %s: no %q event: %w (events: %v)", slot, what, ctx.Err(), evs)
		case <-ch:
		}
	}
}

// report plays a provisioning Job: the completed pod of the startup Job
// gets a termination message naming the instance it "bought" (its id,
// Node name and providerID), which claimstream reads as the host to expect.
func (m *Model) report(ctx context.Context, job string, s Slot) error {
	msg := fmt.Sprintf("instance-id=i-%s\nnode=%s\nprovider-id=%s\n", s.Name, s.node(), s.ProviderID)
	pods := m.client.CoreV1().Pods(m.ns)
	for range 20 {
		l, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
		if err != nil {
			return err
		}
		if len(l.Items) == 0 {
			return fmt.Errorf("job %s has no pod", job)
		}
		p := &l.Items[0]
		if len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("pod %s has no container status", p.Name)
		}
		cs := &p.Status.ContainerStatuses[0]
		if cs.State.Terminated == nil {
			cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", FinishedAt: metav1.Now()}}
		}
		cs.State.Terminated.Message = msg
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err == nil {
			m.record(s.Name, "reported", job)
		}
		return err
	}
	return fmt.Errorf("pod of job %s: too many conflicts", job)
}

// SlotOf is the slot a lifecycle Job was made for.
func SlotOf(j *batchv1.Job) string {
	if s := j.Annotations[AnnotationSlot]; s != "" {
		return s
	}
	return j.Labels[LabelSlot]
}

// hostname is the kubelet's hostname label of a Node: the first DNS label
// of its name (a label value holds at most 63 characters; a Node name up
// to 253).
func hostname(node string) string {
	h, _, _ := strings.Cut(node, ".")
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-")
	}
	return h
}
