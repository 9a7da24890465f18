package sim

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/handlers/decide"
)

// Scenario drives demand in the simulator over time.
type Scenario struct {
	// Speed is how many simulated seconds pass per real second under
	// `serve` with no kubeconfig (ScaledClock); tests run it on a fake clock.
	Speed float64 `json:"speed,omitempty"`
	// Duration is how long the story runs (default: the last step + 15m).
	Duration Duration `json:"duration,omitempty"`
	Timing   struct {
		JobDuration Duration `json:"jobDuration,omitempty"`
		BootDelay   Duration `json:"bootDelay,omitempty"`
		ReadyDelay  Duration `json:"readyDelay,omitempty"`
		TaintDelay  Duration `json:"taintDelay,omitempty"`
		FailureRate float64  `json:"failureRate,omitempty"`
	} `json:"timing,omitempty"`
	Steps []Step `json:"steps"`
}

// Step is one timed action of a scenario.
type Step struct {
	At                 Duration          `json:"at"`
	IncreaseSize       *SizeChange       `json:"increaseSize,omitempty"`
	DecreaseTargetSize *SizeChange       `json:"decreaseTargetSize,omitempty"`
	DeleteNodes        *NodesChange      `json:"deleteNodes,omitempty"`
	Vanish             string            `json:"vanish,omitempty"`
	PowerOn            string            `json:"powerOn,omitempty"`
	Pods               *PodsStart        `json:"pods,omitempty"`
	Knobs              map[string]KnobsY `json:"knobs,omitempty"`
}

// SizeChange is an IncreaseSize or DecreaseTargetSize call.
type SizeChange struct {
	Group string `json:"group"`
	Delta int    `json:"delta"`
}

// PodsStart starts Count tenant pods (work for the built-in scaler's
// groups) named <Name>-<i> in Namespace, each running RunsFor once the
// simulated scheduler binds it (0: forever).
type PodsStart struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Count     int      `json:"count"`
	RunsFor   Duration `json:"runsFor,omitempty"`
}

// NodesChange is a DeleteNodes call.
type NodesChange struct {
	Group string   `json:"group"`
	Nodes []string `json:"nodes"`
}

// KnobsY are Knobs as written in a scenario file.
type KnobsY struct {
	FailStartups int      `json:"failStartups,omitempty"`
	JobHangs     bool     `json:"jobHangs,omitempty"`
	NeverBoots   bool     `json:"neverBoots,omitempty"`
	BootExtra    Duration `json:"bootExtra,omitempty"`
	NeverReady   bool     `json:"neverReady,omitempty"`
	TaintStays   bool     `json:"taintStays,omitempty"`
	ShutdownNoop bool     `json:"shutdownNoop,omitempty"`
}

// Duration reads "2m" in YAML.
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// LoadScenario reads a scenario file (YAML; unknown fields are errors).
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var sc Scenario
	if err := yaml.UnmarshalStrict(b, &sc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for i, st := range sc.Steps {
		if p := st.Pods; p != nil {
			if p.Count < 1 || p.Count > 10000 || p.Name == "" || p.Namespace == "" || p.RunsFor < 0 {
				return nil, fmt.Errorf("%s: steps[%d].pods: want a namespace, a name, a count from 1 to 10000 and a runsFor of 0 or more", path, i)
			}
		}
	}
	sort.SliceStable(sc.Steps, func(i, j int) bool { return sc.Steps[i].At < sc.Steps[j].At })
	if sc.Duration == 0 {
		last := Duration(0)
		if n := len(sc.Steps); n > 0 {
			last = sc.Steps[n-1].At
		}
		sc.Duration = last + Duration(15*time.Minute)
	}
	return &sc, nil
}

// TimingOf is the scenario's simulator timing.
func (sc *Scenario) TimingOf() Timing {
	return Timing{
		JobDuration: time.Duration(sc.Timing.JobDuration), BootDelay: time.Duration(sc.Timing.BootDelay),
		ReadyDelay: time.Duration(sc.Timing.ReadyDelay), TaintDelay: time.Duration(sc.Timing.TaintDelay),
		FailureRate: sc.Timing.FailureRate,
	}
}

// Apply carries one step out through the command service and the
// simulator. A refused command is logged and the story goes on.
func (w *World) Apply(ctx context.Context, st Step) error {
	svc := w.cfg.Service
	log := w.cfg.Log
	run := func(cmd decide.Command) error {
		res, err := svc.Execute(ctx, cmd)
		if decide.CodeOf(err) != 0 {
			log.Warn("scenario step refused", "step", fmt.Sprintf("%T", cmd), "err", err)
			return nil
		}
		if err == nil {
			log.Info("scenario step", "step", fmt.Sprintf("%T", cmd), "events", len(res.Events))
		}
		return err
	}
	for slot, k := range st.Knobs {
		w.Sim.SetKnobs(slot, Knobs{FailStartups: k.FailStartups, JobHangs: k.JobHangs, NeverBoots: k.NeverBoots, BootExtra: time.Duration(k.BootExtra),
			NeverReady: k.NeverReady, TaintStays: k.TaintStays, ShutdownNoop: k.ShutdownNoop})
	}
	if st.Vanish != "" {
		if err := w.Sim.Vanish(ctx, st.Vanish, false); err != nil {
			return err
		}
	}
	if st.PowerOn != "" {
		w.Sim.PowerOn(st.PowerOn)
	}
	if p := st.Pods; p != nil {
		for i := range p.Count {
			if err := w.Sim.RunPod(ctx, PodSpec{Namespace: p.Namespace, Name: fmt.Sprintf("%s-%d", p.Name, i), RunsFor: time.Duration(p.RunsFor)}); err != nil {
				return fmt.Errorf("scenario pods %s/%s-%d: %w", p.Namespace, p.Name, i, err)
			}
		}
		log.Info("scenario step", "step", "pods", "namespace", p.Namespace, "count", p.Count)
	}
	if c := st.IncreaseSize; c != nil {
		if err := run(decide.IncreaseSize{Group: c.Group, Delta: c.Delta, RequestedBy: "scenario"}); err != nil {
			return err
		}
	}
	if c := st.DecreaseTargetSize; c != nil {
		d := c.Delta
		if d > 0 {
			d = -d
		}
		if err := run(decide.DecreaseTargetSize{Group: c.Group, Delta: d, RequestedBy: "scenario"}); err != nil {
			return err
		}
	}
	if c := st.DeleteNodes; c != nil {
		var nodes []decide.NodeRef
		for _, n := range c.Nodes {
			nodes = append(nodes, decide.NodeRef{Name: n})
		}
		if err := run(decide.DeleteNodes{Group: c.Group, Nodes: nodes, RequestedBy: "scenario"}); err != nil {
			return err
		}
	}
	return nil
}

// Play runs a scenario on the world's fake clock: each step at its time,
// then the world until the scenario's duration has passed.
func (w *World) Play(ctx context.Context, sc *Scenario) error {
	start := w.cfg.Clock.Now()
	for _, st := range sc.Steps {
		if d := start.Add(time.Duration(st.At)).Sub(w.cfg.Clock.Now()); d > 0 {
			if err := w.RunFor(ctx, d); err != nil {
				return err
			}
		}
		if err := w.Apply(ctx, st); err != nil {
			return err
		}
	}
	if d := start.Add(time.Duration(sc.Duration)).Sub(w.cfg.Clock.Now()); d > 0 {
		return w.RunFor(ctx, d)
	}
	return nil
}

// PlayRealtime runs a scenario on the world's (real or scaled) clock next
// to World.Run: each step when its time comes. Use it in a goroutine.
func (w *World) PlayRealtime(ctx context.Context, sc *Scenario) error {
	start := w.cfg.Clock.Now()
	for _, st := range sc.Steps {
		if d := start.Add(time.Duration(st.At)).Sub(w.cfg.Clock.Now()); d > 0 {
			t := w.cfg.Clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C():
			}
		}
		if err := w.Apply(ctx, st); err != nil {
			return err
		}
	}
	w.cfg.Log.Info("scenario played", "steps", len(sc.Steps))
	return nil
}
