package handlers

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// JobReaper owns the lifetime of a slot's finished lifecycle Jobs, so the
// log, not a TTL controller racing it, decides when a Job is gone:
//
//   - A finished Job the log still names (the startup Job of the slot's
//     live or newest claim, the slot's last shutdown Job) gets its outcome
//     recorded (a JobObserved with Outcome). It is deleted the pool's
//     ttlSecondsAfterFinished after that record, and a startup Job not
//     before its claim has left booting (its report and the readiness
//     gate read it).
//   - Any other Job of the slot (an older attempt's, a superseded
//     shutdown's) no reactor creates again; it is deleted the pool's TTL
//     after its end, and never within the group's job timeout of its
//     create (a shutdown Job never observed is recreated only within it).
//
// A pool with no ttlSecondsAfterFinished keeps its Jobs, as Kubernetes
// does. A Job that carries a ttlSecondsAfterFinished of its own (made by
// a claimstream that left Jobs to Kubernetes) gets its outcome recorded
// if a pass sees it finished, and is left to the TTL controller.
type JobReaper struct{ base }

func (r *JobReaper) Name() string { return "jobreaper" }

func (r *JobReaper) Reconcile(ctx context.Context, slot string) (time.Duration, error) {
	jobs := r.cluster.SlotJobs(slot)
	if len(jobs) == 0 {
		return 0, nil
	}
	v := r.view(slot)
	if !v.Exists {
		return 0, nil
	}
	var next time.Duration
	for _, st := range jobs {
		if !st.Finished() {
			continue
		}
		d, err := r.reap(ctx, v, st)
		if err != nil {
			return 0, err
		}
		if d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next, nil
}

// loggedJob is what the log says of a Job it still names.
type loggedJob struct {
	op       string
	claim    string
	attempt  int
	observed bool
	outcome  *projections.JobOutcome
	// hold: the Job is still read (a booting claim's startup Job).
	hold bool
}

// logged finds the Job in the slot's view: the live or newest claim's
// startup Job, or the slot's last shutdown Job.
func logged(v slotView, name string) (loggedJob, bool) {
	for _, c := range []*projections.Claim{v.Live, v.Newest} {
		if c != nil && c.StartupJob == name {
			return loggedJob{op: decide.OperationStartup, claim: c.Name, attempt: c.Attempt, observed: c.StartupJobObserved,
				outcome: c.StartupJobOutcome, hold: c.Phase == projections.PhaseBooting}, true
		}
	}
	if ls := v.Slot.LastShutdown; ls != nil && ls.Job == name {
		return loggedJob{op: decide.OperationShutdown, claim: ls.Claim, attempt: ls.Attempt, observed: ls.Observed, outcome: ls.Outcome}, true
	}
	return loggedJob{}, false
}

// reap records the outcome of one finished Job, or deletes it when its
// time came; it returns when to look again (0: a change will tell).
func (r *JobReaper) reap(ctx context.Context, v slotView, st JobState) (time.Duration, error) {
	op := st.Labels[LabelOperation]
	spec := v.Slot.Spec.Startup
	if op == decide.OperationShutdown {
		spec = v.Slot.Spec.Shutdown
	}
	lj, named := logged(v, st.Name)
	if named && lj.outcome == nil {
		outcome, finished, reason := jobOutcome(st)
		var msg string
		if outcome == events.JobFailed {
			var err error
			if msg, err = r.failureMessage(ctx, st.Name); err != nil {
				return 0, err
			}
		}
		_, err := r.exec(ctx, r.Name(), decide.ObserveJob{
			Slot: v.Slot.Name, Claim: lj.claim, Job: st.Name, Operation: lj.op,
			Outcome: outcome, FinishedAt: finished, Reason: reason, Message: msg,
			Cause: "job reaper: " + lj.op + " Job " + outcome,
		})
		return 0, err
	}
	if st.OwnTTL || spec == nil || spec.TTLSecondsAfterFinished == nil {
		return 0, nil // Kubernetes' TTL controller has it, or the pool keeps its Jobs
	}
	ttl := time.Duration(*spec.TTLSecondsAfterFinished) * time.Second
	var at time.Time
	switch {
	case named && lj.hold:
		return 0, nil
	case named:
		at = lj.outcome.RecordedAt.Add(ttl)
	default:
		at = st.FinishedAt.Add(ttl)
		if created := st.CreatedAt.Add(v.timeouts().JobTimeout); created.After(at) {
			at = created
		}
	}
	now := r.now()
	if now.Before(at) {
		return after(now, at), nil
	}
	if err := r.cluster.DeleteJob(ctx, st.Name); err != nil {
		return 0, err
	}
	why := "its outcome in the log"
	if !named {
		why = "superseded"
	}
	r.log.Info("finished "+op+" Job deleted: ttlSecondsAfterFinished passed", "slot", v.Slot.Name, "job", st.Name, "why", why, "ttl", ttl)
	return 0, nil
}
