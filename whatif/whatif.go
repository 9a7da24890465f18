package whatif

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers/pool"
)

// MaxCandidates bounds the configs of one what-if: each is a full run.
const MaxCandidates = 8

// MaxWindow bounds a what-if's period: the runs' work grows with the
// simulated time, and a request must not keep the cores busy for years of
// it.
const MaxWindow = 31 * 24 * time.Hour

// MaxRunTime bounds the wall time of one what-if (its runs together): past
// it the runs are stopped and the request is refused.
const MaxRunTime = 10 * time.Minute

// ErrWindowTooLong refuses a period longer than MaxWindow.
var ErrWindowTooLong = fmt.Errorf("the period is longer than the what-if limit of %s (whatif.MaxWindow): ask about a shorter one", durationDays(MaxWindow))

// ErrRunTooLong refuses a what-if whose runs outlast their time limit
// (MaxRunTime).
var ErrRunTooLong = errors.New("the runs took longer than the what-if time limit and were stopped: ask about a shorter period or fewer candidates")

// durationDays spells a whole number of days as days.
func durationDays(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// CheckWindow refuses a period longer than MaxWindow, naming the limit.
func CheckWindow(from, to time.Time) error {
	if to.Sub(from) > MaxWindow {
		return fmt.Errorf("%w (from %s, to %s: %s)", ErrWindowTooLong, from.Format(time.RFC3339), to.Format(time.RFC3339), to.Sub(from).Round(time.Second))
	}
	return nil
}

// Candidate is a pool config to replay the period under.
type Candidate struct {
	// Name labels its column (the file's name).
	Name   string
	Config *pool.Config
}

// Options of a what-if.
type Options struct {
	From, To   time.Time
	Candidates []Candidate
	// Seed drives every random draw of the simulated machines: one seed,
	// one answer.
	Seed int64
	// MinSamples: see MinSamples (0: the default).
	MinSamples int
	// Progress, when set, is told of each run's progress (simulated time
	// covered), at most once per percent.
	Progress func(Progress)
	// RunTimeLimit bounds the runs' wall time (0: MaxRunTime).
	RunTimeLimit time.Duration
}

// Report is a what-if's answer.
type Report struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	Seed int64     `json:"seed"`
	// LastSeq is the recorded log's last sequence when it was read.
	LastSeq uint64 `json:"lastSeq"`
	// Recorded is the period as the log tells it; Baseline the replay
	// under the config recorded at From; Candidates one replay each.
	Recorded   Outcome   `json:"recorded"`
	Baseline   Outcome   `json:"baseline"`
	Candidates []Outcome `json:"candidates"`
	// Deltas are each candidate minus the baseline.
	Deltas []Outcome `json:"deltas"`
	// FellBack lists the slots whose own history was too thin (fewer than
	// MinSamples boots), with where their model came from.
	FellBack []string `json:"fellBack"`
	// Requests and DemandChanges count the demand facts replayed.
	Requests      int `json:"requests"`
	DemandChanges int `json:"demandChanges"`
}

// Run replays [From, To) of the log in store under the recorded config and
// under each candidate. The store is only read.
func Run(ctx context.Context, store *eventlog.Store, opts Options) (*Report, error) {
	if len(opts.Candidates) == 0 {
		return nil, errors.New("what-if: no candidate config: give at least one pool file")
	}
	if len(opts.Candidates) > MaxCandidates {
		return nil, fmt.Errorf("what-if: %d candidate configs, at most %d", len(opts.Candidates), MaxCandidates)
	}
	for i, c := range opts.Candidates {
		if c.Config == nil {
			return nil, fmt.Errorf("what-if: candidate %d (%s) has no config", i+1, c.Name)
		}
	}
	if err := CheckWindow(opts.From, opts.To); err != nil {
		return nil, fmt.Errorf("what-if: %w", err)
	}
	limit := opts.RunTimeLimit
	if limit <= 0 || limit > MaxRunTime {
		limit = MaxRunTime
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	rep, err := run(ctx, store, opts)
	if err != nil && parent.Err() == nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, fmt.Errorf("what-if: %w (limit %s, whatif.MaxRunTime)", ErrRunTooLong, limit)
	}
	return rep, err
}

func run(ctx context.Context, store *eventlog.Store, opts Options) (*Report, error) {
	rec, err := Read(ctx, store, opts.From, opts.To, opts.MinSamples)
	if err != nil {
		return nil, err
	}
	rep := &Report{From: rec.From, To: rec.To, Seed: opts.Seed, LastSeq: rec.LastSeq, Recorded: rec.Recorded,
		FellBack: rec.Models.FellBack(), Requests: len(rec.Requests), DemandChanges: rec.DemandChanges}
	if rep.FellBack == nil {
		rep.FellBack = []string{}
	}
	// The runs share nothing (each its own log, world and seeded draws),
	// so they run side by side, as many at once as there are CPUs for Go
	// to run on: more than that contend for them and take more wall time
	// and more CPU.
	runs := append([]Candidate{{Name: "baseline", Config: rec.Baseline}}, opts.Candidates...)
	outs := make([]Outcome, len(runs))
	errs := make([]error, len(runs))
	var mu sync.Mutex
	progress := opts.Progress
	if progress != nil {
		progress = func(p Progress) {
			mu.Lock()
			defer mu.Unlock()
			opts.Progress(p)
		}
	}
	sem := make(chan struct{}, min(ParallelRuns, max(runtime.GOMAXPROCS(0), 1)))
	var wg sync.WaitGroup
	for i, c := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			outs[i], errs[i] = Replay(ctx, rec, c.Name, c.Config, opts.Seed, progress)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	rep.Baseline = outs[0]
	for _, o := range outs[1:] {
		rep.Candidates = append(rep.Candidates, o)
		rep.Deltas = append(rep.Deltas, delta(o, rep.Baseline))
	}
	return rep, nil
}

// ParallelRuns bounds the runs of one what-if that go at once (and
// GOMAXPROCS does too).
const ParallelRuns = 4

// Replay is one run of the recording under cfg.
func Replay(ctx context.Context, rec *Recording, name string, cfg *pool.Config, seed int64, progress func(Progress)) (Outcome, error) {
	r, err := startReplayer(ctx, rec, name, cfg, seed)
	if err != nil {
		return Outcome{}, err
	}
	defer r.close()
	return r.run(ctx, progress)
}

// delta is o minus base, figure by figure.
func delta(o, base Outcome) Outcome {
	d := Outcome{
		Name: o.Name, Claims: o.Claims - base.Claims,
		MachineHours: round3(o.MachineHours - base.MachineHours), KWh: round3(o.KWh - base.KWh),
		Cost: map[string]float64{}, Boots: o.Boots - base.Boots, FailedBoots: o.FailedBoots - base.FailedBoots,
		TimeToReadyP50: o.TimeToReadyP50 - base.TimeToReadyP50, TimeToReadyP95: o.TimeToReadyP95 - base.TimeToReadyP95,
		WaitMinutes: round3(o.WaitMinutes - base.WaitMinutes), PeakMachines: o.PeakMachines - base.PeakMachines,
		Events: o.Events - base.Events,
	}
	for _, c := range currencies(o, base) {
		d.Cost[c] = round3(o.Cost[c] - base.Cost[c])
	}
	return d
}
