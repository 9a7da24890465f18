package projections

import (
	"time"

	"github.com/claimstream/claimstream/events"
)

// The numbers of docs/design.md. The three lifecycle timeouts are per-group
// settings (events.Lifecycle) with these defaults; the rest are constants
// of the model.
const (
	// DefaultJobTimeout bounds the startup Job (JobTimeout is a reachable
	// failure).
	DefaultJobTimeout = 5 * time.Minute
	// JobMonitorPollInterval is how often the Job monitor looks.
	JobMonitorPollInterval = 30 * time.Second
	// DefaultRegistrationWait is how long the readiness gate waits for the
	// Node object to appear (the seed's DefaultUncordonTimeout).
	DefaultRegistrationWait = 90 * time.Second
	// DefaultReadinessGateTimeout is how long the gate waits, from the
	// Node's appearance, for Ready and free of the readiness taints.
	DefaultReadinessGateTimeout = 4 * time.Minute
	// MaxUncordonRetryInterval is one sleep of the uncordon retry at its
	// ceiling.
	MaxUncordonRetryInterval = 10 * time.Second
	// BudgetMargin is the last member of the budget.
	BudgetMargin = time.Minute

	// MaxConsecutiveAttempts bounds the boots of a slot's consecutive
	// claims that did not produce a machine.
	MaxConsecutiveAttempts = 3
	// ShutdownAttemptLimit bounds the shutdown Jobs of one scale-down
	// before it pauses.
	ShutdownAttemptLimit = 3
	// ShutdownAttemptResetGrace is the pause after ShutdownAttemptLimit;
	// past it the count restarts and the shutdown fires again. The same
	// pause applies to a slot whose boots hit MaxConsecutiveAttempts.
	ShutdownAttemptResetGrace = 30 * time.Minute
	// ReconcilePeriod is how often the reactors look at every slot.
	ReconcilePeriod = 15 * time.Second
	// DefaultClaimTTL is how long a terminal claim stays in the live views.
	DefaultClaimTTL = time.Hour
	// RecentFailureWindow is how long a failed claim is reported to
	// cluster-autoscaler as a create error.
	RecentFailureWindow = 5 * time.Minute
)

// DefaultReadinessTaint is the taint a group waits to see removed when it
// declares none: Cilium's agent-not-ready.
var DefaultReadinessTaint = events.Taint{Key: "node.cilium.io/agent-not-ready", Effect: "NoExecute"}

// BudgetMember is one term of the boot budget.
type BudgetMember struct {
	Name     string
	Duration time.Duration
}

// Timeouts are a group's lifecycle timeouts with defaults applied.
type Timeouts struct {
	JobTimeout       time.Duration
	RegistrationWait time.Duration
	ReadinessGate    time.Duration
}

// DefaultTimeouts are the seed's values.
var DefaultTimeouts = Timeouts{
	JobTimeout:       DefaultJobTimeout,
	RegistrationWait: DefaultRegistrationWait,
	ReadinessGate:    DefaultReadinessGateTimeout,
}

// TimeoutsOf applies the defaults to a group's lifecycle settings.
func TimeoutsOf(l events.Lifecycle) Timeouts {
	t := DefaultTimeouts
	if l.StartupJobTimeout > 0 {
		t.JobTimeout = l.StartupJobTimeout.D()
	}
	if l.RegistrationWait > 0 {
		t.RegistrationWait = l.RegistrationWait.D()
	}
	if l.ReadinessGate > 0 {
		t.ReadinessGate = l.ReadinessGate.D()
	}
	return t
}

// BudgetConstants is the set the boot budget is the sum of: every deadline
// one attempt can spend in series, plus one retry sleep at its ceiling and a
// margin. The clock starts at requestedAt, before the Job exists, so the
// Job's own timeout is a member.
func (t Timeouts) BudgetConstants() []BudgetMember {
	return []BudgetMember{
		{"JobTimeout", t.JobTimeout},
		{"JobMonitorPollInterval", JobMonitorPollInterval},
		{"RegistrationWait", t.RegistrationWait},
		{"ReadinessGateTimeout", t.ReadinessGate},
		{"MaxUncordonRetryInterval", MaxUncordonRetryInterval},
		{"BudgetMargin", BudgetMargin},
	}
}

// Budget is the sum of BudgetConstants: 12m10s with the defaults.
func (t Timeouts) Budget() time.Duration {
	var sum time.Duration
	for _, m := range t.BudgetConstants() {
		sum += m.Duration
	}
	return sum
}

// DefaultBudget is the budget of a group that sets no timeouts.
var DefaultBudget = DefaultTimeouts.Budget()

// BootWindow is how long a claim of a group with this spec may take from
// request to ready: max(budget, maxNodeProvisionTime). It is the deadline's
// length and the machine-gone grace.
func BootWindow(spec events.GroupSpec) time.Duration {
	return max(TimeoutsOf(spec.Lifecycle).Budget(), spec.MaxNodeProvisionTime.D())
}

// DeadlineAt is requestedAt + max(budget, maxNodeProvisionTime).
func DeadlineAt(requestedAt time.Time, spec events.GroupSpec) time.Time {
	return requestedAt.Add(BootWindow(spec))
}

// MachineGoneGrace is how long a ready claim's machine may be observed off
// before the claim fails MachineGone: one boot window, so a reboot heals.
func MachineGoneGrace(spec events.GroupSpec) time.Duration { return BootWindow(spec) }

// ClaimTTL is how long a terminal claim of the group stays in the views.
func ClaimTTL(spec events.GroupSpec) time.Duration {
	if spec.ClaimTTL > 0 {
		return spec.ClaimTTL.D()
	}
	return DefaultClaimTTL
}

// ReadinessTaints are the taints a group's readiness gate waits out.
func ReadinessTaints(spec events.GroupSpec) []events.Taint {
	if spec.ReadinessTaints == nil {
		return []events.Taint{DefaultReadinessTaint}
	}
	return spec.ReadinessTaints
}
