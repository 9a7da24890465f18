// Package sim simulates a cluster and its machines over client-go's fake
// clientset, under the same reactors and the same kube adapter as
// production: a startup Job "boots" a machine after a delay (or fails at a
// configurable rate), the machine registers a NotReady Node carrying the
// group's readiness taints, becomes Ready, sheds the taints; a shutdown Job
// powers the machine off. All timing is on the injected clock.
package sim

import (
	"container/heap"
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/projections"
)

// Timing is how long the simulated world takes.
type Timing struct {
	// JobDuration: a lifecycle Job runs this long (default 20s).
	JobDuration time.Duration
	// FailureRate: the probability a startup Job fails.
	FailureRate float64
	// BootDelay: from the startup Job's completion to the Node's
	// registration (default 40s).
	BootDelay time.Duration
	// ReadyDelay: from registration to Ready (default 20s).
	ReadyDelay time.Duration
	// TaintDelay: from Ready to the readiness taints' removal (default 15s).
	TaintDelay time.Duration
	// PowerOffDelay: from the shutdown Job's completion to the Node going
	// NotReady (default 0).
	PowerOffDelay time.Duration
	// PodsPerNode: how many running pods the simulated scheduler binds to
	// one Node (default 110).
	PodsPerNode int
	// FinishedJobTTL: a finished Job without a ttlSecondsAfterFinished of
	// its own is deleted this long after it finished (0: kept, as
	// Kubernetes keeps it).
	FinishedJobTTL time.Duration
}

func (t Timing) withDefaults() Timing {
	if t.JobDuration == 0 {
		t.JobDuration = 20 * time.Second
	}
	if t.BootDelay == 0 {
		t.BootDelay = 40 * time.Second
	}
	if t.ReadyDelay == 0 {
		t.ReadyDelay = 20 * time.Second
	}
	if t.TaintDelay == 0 {
		t.TaintDelay = 15 * time.Second
	}
	if t.PodsPerNode == 0 {
		t.PodsPerNode = 110
	}
	return t
}

// Knobs are one machine's misbehaviours.
type Knobs struct {
	// FailStartups: the next N startup Jobs of the slot fail.
	FailStartups int `json:"failStartups,omitempty"`
	// JobHangs: startup Jobs never finish (Kubernetes stops them at their
	// activeDeadlineSeconds).
	JobHangs bool `json:"jobHangs,omitempty"`
	// NeverBoots: the startup Job succeeds, the machine never registers.
	NeverBoots bool `json:"neverBoots,omitempty"`
	// BootExtra: the machine boots this much later than BootDelay.
	BootExtra time.Duration `json:"bootExtra,omitempty"`
	// NeverReady: the Node registers and never becomes Ready.
	NeverReady bool `json:"neverReady,omitempty"`
	// TaintStays: the readiness taints are never removed.
	TaintStays bool `json:"taintStays,omitempty"`
	// ShutdownNoop: shutdown Jobs succeed and the machine stays up.
	ShutdownNoop bool `json:"shutdownNoop,omitempty"`
	// InstanceID: a succeeding startup Job reports this instance in its
	// pod's termination message (a provisioning Job that bought a machine).
	InstanceID string `json:"instanceID,omitempty"`
	// Node and ProviderID: the machine registers its Node under this name
	// and providerID instead of the slot's (a cloud instance named by its
	// provider), and the startup Job reports them with InstanceID.
	Node       string `json:"node,omitempty"`
	ProviderID string `json:"providerID,omitempty"`
	// Report: the startup Job's termination message as is (it replaces
	// the report made of InstanceID, Node and ProviderID).
	Report string `json:"report,omitempty"`
	// A machine modelled from its history (docs/whatif.md): BootSamples
	// are recorded durations from the startup Job's creation to the Node
	// Ready, ShutdownSamples from the shutdown Job's creation to the Node
	// NotReady, TaintSamples from the Node Ready to the claim ready (its
	// readiness taints gone); each boot, shutdown or readiness gate draws
	// one (seeded). FailureRate, when set, replaces Timing.FailureRate for
	// the slot.
	BootSamples     []time.Duration `json:"bootSamples,omitempty"`
	ShutdownSamples []time.Duration `json:"shutdownSamples,omitempty"`
	TaintSamples    []time.Duration `json:"taintSamples,omitempty"`
	FailureRate     *float64        `json:"failureRate,omitempty"`
}

// bootStages splits a recorded boot (the startup Job's creation to the
// Node Ready) into the Job's run, the wait for the Node's registration
// and its way to Ready. A boot as long as the Job and the way to Ready or
// longer keeps their durations and registers late; a shorter one (a
// machine that boots in seconds) shrinks both in proportion, so that the
// Node is Ready when the sample says, not after the defaults.
func (t Timing) bootStages(sample time.Duration) (job, register, ready time.Duration) {
	fixed := t.JobDuration + t.ReadyDelay
	if sample >= fixed {
		return t.JobDuration, sample - fixed, t.ReadyDelay
	}
	job = time.Duration(float64(sample) * float64(t.JobDuration) / float64(fixed))
	return job, 0, sample - job
}

// report is the termination message a succeeding startup Job leaves.
func (k Knobs) report() string {
	if k.Report != "" || k.InstanceID == "" {
		return k.Report
	}
	msg := "instance-id=" + k.InstanceID
	if k.Node != "" {
		msg += "\nnode=" + k.Node
	}
	if k.ProviderID != "" {
		msg += "\nprovider-id=" + k.ProviderID
	}
	return msg
}

// Config builds a Sim.
type Config struct {
	Fake      *kube.Fake
	Namespace string
	Clock     clock.PassiveClock
	// Views give the simulator the declared pool (providerIDs, readiness
	// taints); it never reads claims.
	Views  *projections.Runner
	Seed   int64
	Timing Timing
}

type machine struct {
	on  bool
	gen int // bumped by every power-off; a boot step of an older gen is void
	// node is the name its Node registered under (the slot's unless the
	// slot's knobs name another).
	node string
}

type action struct {
	at  time.Time
	seq int
	do  func(ctx context.Context) error
}

// Sim is the simulated world.
type Sim struct {
	fake   *kube.Fake
	ns     string
	clock  clock.PassiveClock
	timing Timing

	mu       sync.Mutex
	views    *projections.Runner
	rng      *rand.Rand
	knobs    map[string]Knobs
	machines map[string]*machine
	newJobs  []*batchv1.Job
	// queue is a min-heap by (at, seq): a pool of 10,000 machines keeps
	// tens of thousands of actions waiting, and a step takes only the due
	// ones.
	queue  actionHeap
	seq    int
	notify chan struct{}
	// Counters, for tests and the benchmark.
	StartupJobs, ShutdownJobs, Boots, PowerOffs int
}

// New builds a Sim and hooks it into the fake clientset.
func New(cfg Config) *Sim {
	if cfg.Namespace == "" {
		cfg.Namespace = "claimstream"
	}
	s := &Sim{
		fake: cfg.Fake, ns: cfg.Namespace, clock: cfg.Clock, timing: cfg.Timing.withDefaults(),
		views: cfg.Views, rng: rand.New(rand.NewSource(cfg.Seed)),
		knobs: map[string]Knobs{}, machines: map[string]*machine{}, notify: make(chan struct{}, 1),
	}
	cfg.Fake.StampCreation(func() time.Time { return s.clock.Now().UTC() }, s.jobCreated)
	return s
}

// SetViews points the simulator at new views (after a process restart).
func (s *Sim) SetViews(v *projections.Runner) {
	s.mu.Lock()
	s.views = v
	s.mu.Unlock()
}

// SetKnobs sets a slot's misbehaviours.
func (s *Sim) SetKnobs(slot string, k Knobs) {
	s.mu.Lock()
	s.knobs[slot] = k
	s.mu.Unlock()
}

// Knobs returns a slot's misbehaviours.
func (s *Sim) Knobs(slot string) Knobs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.knobs[slot]
}

// On reports whether the slot's machine is powered on.
func (s *Sim) On(slot string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.machines[slot]
	return m != nil && m.on
}

// Notify is signalled when a Job is created (for a real-time loop).
func (s *Sim) Notify() <-chan struct{} { return s.notify }

func (s *Sim) jobCreated(j *batchv1.Job) {
	s.mu.Lock()
	s.newJobs = append(s.newJobs, j)
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Sim) machine(slot string) *machine {
	m := s.machines[slot]
	if m == nil {
		m = &machine{node: slot}
		s.machines[slot] = m
	}
	return m
}

// NodeOf is the name of the Node the slot's machine registers (registered)
// under.
func (s *Sim) NodeOf(slot string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.machine(slot).node
}

// schedule runs do at `at` (s.mu held).
func (s *Sim) schedule(at time.Time, do func(ctx context.Context) error) {
	s.seq++
	heap.Push(&s.queue, action{at: at, seq: s.seq, do: do})
}

// actionHeap orders actions by time, then by the order they were
// scheduled in.
type actionHeap []action

func (h actionHeap) Len() int { return len(h) }
func (h actionHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h actionHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *actionHeap) Push(x any)   { *h = append(*h, x.(action)) }
func (h *actionHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = action{}
	*h = old[:len(old)-1]
	return a
}

// NextAt is when the next scheduled action is due.
func (s *Sim) NextAt() (time.Time, bool) {
	// A write on its way to the informers is a time the world must reach.
	due, pending := s.fake.NextDue()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.newJobs) > 0 {
		return s.clock.Now(), true
	}
	if len(s.queue) == 0 {
		return due, pending
	}
	if pending && due.Before(s.queue[0].at) {
		return due, true
	}
	return s.queue[0].at, true
}

// Step takes in the Jobs created since the last step and runs every action
// due now, in time order. It returns how many actions ran.
func (s *Sim) Step(ctx context.Context) (int, error) {
	s.mu.Lock()
	jobs := s.newJobs
	s.newJobs = nil
	for _, j := range jobs {
		s.takeJob(j)
	}
	now := s.clock.Now()
	var due []action
	for len(s.queue) > 0 && !s.queue[0].at.After(now) {
		due = append(due, heap.Pop(&s.queue).(action))
	}
	s.mu.Unlock()
	for _, a := range due {
		if err := a.do(ctx); err != nil {
			return len(due), err
		}
	}
	bound, err := s.schedulePods(ctx)
	if err != nil {
		return len(due), err
	}
	// client-go's fake clientset keeps a deep copy of every call for
	// tests that read its Actions(); nothing here does, and a simulated
	// week made millions of them (every Job and Node write, every list),
	// all kept until the world was dropped.
	s.fake.ClearActions()
	return len(due) + len(jobs) + bound, nil
}

// takeJob schedules what a new Job does (s.mu held).
func (s *Sim) takeJob(j *batchv1.Job) {
	slot := handlers.SlotOfJob(j.Labels, j.Annotations)
	op := j.Labels[handlers.LabelOperation]
	created := j.CreationTimestamp.Time
	if created.IsZero() {
		created = s.clock.Now()
	}
	name := j.Name
	k := s.knobs[slot]
	t := s.timing
	if j.Spec.ActiveDeadlineSeconds != nil {
		deadline := created.Add(time.Duration(*j.Spec.ActiveDeadlineSeconds) * time.Second)
		s.schedule(deadline, func(ctx context.Context) error {
			return s.fake.FinishJob(ctx, s.ns, name, false, handlers.JobReasonDeadlineExceeded, "Job was active longer than specified deadline", deadline)
		})
	}
	ttl, collect := t.FinishedJobTTL, t.FinishedJobTTL > 0
	if j.Spec.TTLSecondsAfterFinished != nil {
		ttl, collect = time.Duration(*j.Spec.TTLSecondsAfterFinished)*time.Second, true
	}
	finish := func(ctx context.Context, at time.Time, ok bool, reason string) error {
		if err := s.fake.FinishJob(ctx, s.ns, name, ok, reason, "", at); err != nil {
			return err
		}
		if collect {
			s.mu.Lock()
			s.schedule(at.Add(ttl), func(ctx context.Context) error { return s.fake.DeleteJob(ctx, s.ns, name) })
			s.mu.Unlock()
		}
		return nil
	}
	switch op {
	case decide.OperationStartup:
		s.StartupJobs++
		if k.JobHangs {
			return
		}
		fail := false
		if k.FailStartups > 0 {
			k.FailStartups--
			s.knobs[slot] = k
			fail = true
		} else if rate := failureRate(k, t); rate > 0 && s.rng.Float64() < rate {
			fail = true
		}
		// A modelled machine's boot is drawn as its Job starts: the
		// sample sets the Job's duration too.
		var drawn *bootStages
		job := t.JobDuration
		if !fail && !k.NeverBoots && len(k.BootSamples) > 0 {
			st := s.stages(k)
			drawn, job = &st, st.job
		}
		at := created.Add(job)
		s.schedule(at, func(ctx context.Context) error {
			if fail {
				return finish(ctx, at, false, "BackoffLimitExceeded")
			}
			// The pod's termination message is there before the Job
			// succeeds, as the Job controller sees the pod end first.
			if msg := s.Knobs(slot).report(); msg != "" {
				if err := s.reportInstance(ctx, name, msg, at); err != nil {
					return err
				}
			}
			if err := finish(ctx, at, true, ""); err != nil {
				return err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			s.boot(slot, at, drawn)
			return nil
		})
	case decide.OperationShutdown:
		s.ShutdownJobs++
		// A modelled machine's shutdown is drawn as its Job starts: a
		// shutdown shorter than the Job ends with it.
		job, offAfter := t.JobDuration, t.PowerOffDelay
		if ks := k.ShutdownSamples; len(ks) > 0 && !k.ShutdownNoop {
			sample := ks[s.rng.Intn(len(ks))]
			job = min(job, sample)
			offAfter = sample - job
		}
		at := created.Add(job)
		s.schedule(at, func(ctx context.Context) error {
			if err := finish(ctx, at, true, ""); err != nil {
				return err
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.knobs[slot].ShutdownNoop {
				return nil
			}
			off := at.Add(offAfter)
			s.schedule(off, func(ctx context.Context) error { return s.powerOff(ctx, slot, off, false) })
			return nil
		})
	}
}

// bootStages are a boot's durations after its Job's creation.
type bootStages struct{ job, register, ready time.Duration }

// stages are the durations of a boot of the machine k: the timing's, or
// one of its recorded boots when it is modelled (a draw, s.mu held).
func (s *Sim) stages(k Knobs) bootStages {
	t := s.timing
	if len(k.BootSamples) == 0 {
		return bootStages{job: t.JobDuration, register: t.BootDelay + k.BootExtra, ready: t.ReadyDelay}
	}
	var b bootStages
	b.job, b.register, b.ready = t.bootStages(k.BootSamples[s.rng.Intn(len(k.BootSamples))])
	return b
}

// boot schedules a machine's boot from `at`, its startup Job's end: by
// the stages drawn when the Job started, else by the knobs now (s.mu held).
func (s *Sim) boot(slot string, at time.Time, drawn *bootStages) {
	k := s.knobs[slot]
	if k.NeverBoots {
		return
	}
	var stages bootStages
	if drawn != nil {
		stages = *drawn
	} else {
		stages = s.stages(k)
	}
	m := s.machine(slot)
	gen := m.gen
	t := s.timing
	reg := at.Add(stages.register)
	current := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.machine(slot).gen == gen
	}
	s.schedule(reg, func(ctx context.Context) error {
		if !current() {
			return nil
		}
		providerID, taints := s.declared(slot)
		s.mu.Lock()
		m := s.machine(slot)
		m.on = true
		s.Boots++
		k := s.knobs[slot]
		m.node = slot
		if k.Node != "" {
			m.node = k.Node
		}
		if k.ProviderID != "" {
			providerID = k.ProviderID
		}
		node := m.node
		s.mu.Unlock()
		if err := s.fake.RegisterNode(ctx, node, providerID, taints, reg); err != nil {
			return err
		}
		if k.NeverReady {
			return nil
		}
		ready := reg.Add(stages.ready)
		s.mu.Lock()
		s.schedule(ready, func(ctx context.Context) error {
			if !current() {
				return nil
			}
			if err := s.fake.SetNodeReady(ctx, node, true, ready); err != nil {
				return err
			}
			if s.Knobs(slot).TaintStays || len(taints) == 0 {
				return nil
			}
			clear := ready.Add(t.TaintDelay)
			s.mu.Lock()
			if ks := s.knobs[slot].TaintSamples; len(ks) > 0 {
				clear = ready.Add(ks[s.rng.Intn(len(ks))])
			}
			s.schedule(clear, func(ctx context.Context) error {
				if !current() {
					return nil
				}
				keys := make([]string, len(taints))
				for i, tt := range taints {
					keys[i] = tt.Key
				}
				return s.fake.RemoveNodeTaints(ctx, node, keys...)
			})
			s.mu.Unlock()
			return nil
		})
		s.mu.Unlock()
		return nil
	})
}

// declared reads the slot's providerID and its group's readiness taints.
func (s *Sim) declared(slot string) (string, []events.Taint) {
	s.mu.Lock()
	views := s.views
	s.mu.Unlock()
	providerID := events.DefaultProviderID(slot)
	var taints []events.Taint
	if views != nil {
		views.Read(func(st *projections.State) {
			if sl := st.Slots[slot]; sl != nil {
				providerID = sl.ProviderID()
				if g := st.Groups[sl.Group]; g != nil {
					taints = slices.Clone(projections.ReadinessTaints(g.Spec))
				}
			}
		})
	}
	return providerID, taints
}

func (s *Sim) powerOff(ctx context.Context, slot string, at time.Time, deleteNode bool) error {
	s.mu.Lock()
	m := s.machine(slot)
	m.gen++
	wasOn := m.on
	m.on = false
	if wasOn {
		s.PowerOffs++
	}
	node := m.node
	s.mu.Unlock()
	if deleteNode {
		return s.fake.DeleteNodeObject(ctx, node)
	}
	return s.fake.SetNodeReady(ctx, node, false, at)
}

// Vanish powers a machine off now, outside any Job (a console delete, a
// power cut); deleteNode also removes its Node object.
func (s *Sim) Vanish(ctx context.Context, slot string, deleteNode bool) error {
	return s.powerOff(ctx, slot, s.clock.Now().UTC(), deleteNode)
}

// PowerOn switches a machine on by hand (no claim, no Job): it boots like a
// started one.
func (s *Sim) PowerOn(slot string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.boot(slot, s.clock.Now().UTC(), nil)
}

// String summarizes the world.
func (s *Sim) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	on := 0
	for _, m := range s.machines {
		if m.on {
			on++
		}
	}
	return fmt.Sprintf("%d machines on, %d startup Jobs, %d shutdown Jobs, %d boots, %d power-offs, %d actions queued", on, s.StartupJobs, s.ShutdownJobs, s.Boots, s.PowerOffs, len(s.queue))
}

// failureRate is the slot's modelled failure rate, else the world's.
func failureRate(k Knobs, t Timing) float64 {
	if k.FailureRate != nil {
		return *k.FailureRate
	}
	return t.FailureRate
}
