package telemetry

import (
	"context"
	"sort"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/internal/buildinfo"
	"github.com/claimstream/claimstream/projections"
)

// Instruments of the build, the claims created and the slots.
const (
	// claimstream_build_info{version,revision,go_version} 1.
	InstBuildInfo = "claimstream_build_info"
	// claimstream_claims_created_total{group,requester}: ClaimCreated;
	// requester is one of Requesters (RequesterKind), never the caller's
	// text.
	InstClaimsCreated = "claimstream_claims_created"
	// claimstream_slots{group,state}: slots by their reported state.
	InstSlots = "claimstream_slots"
)

// The instruments' descriptions (the HELP of the scrape), shared with the
// zeros of atzero.go.
const (
	descTimeToReady    = "Time from a claim's request to its ClaimReady."
	descAttempts       = "The attempt (machine bought in the slot's streak) of each ClaimBooting."
	descFailures       = "Claims failed, by reason."
	descDeadlineMisses = "Claims failed DeadlineExceeded."
	descShutdowns      = "Shutdown Jobs fired (ShutdownFired)."
	descShutdownLimits = "Machines that stayed up after their bound of shutdown Jobs (ShutdownAttemptLimitReached, UnclaimedShutdownPaused)."
	descJoinsRefused   = "Nodes that joined unexpected (HostJoinRefused)."
	descAppend         = "Latency of one append to the event log."
	descWork           = "Time one reactor work item (a slot, the built-in scaler, the stray hosts) took."
	descReaction       = "Time from an event to the end of the reconcile it caused."
	descBackups        = "Backups of the log served, by result."
	descTLSReloads     = "TLS certificate rotations that did not load; the previous certificate stays in service."
	descPoolFailures   = "Pool files that did not load (reason=invalid), that the log refused (refused), or whose apply stopped part-way (stopped)."
	descClaimsCreated  = "Claims created (ClaimCreated), by group and by the kind of caller that asked (cluster-autoscaler, builtin-scaler, scenario, dashboard, api, other)."
	descLogFailures    = "Failed appends to the event log, by reason."
	descSinkFailures   = "Failed webhook delivery attempts."
	descSinkDelivered  = "Events a webhook sink accepted."
	descSinkDead       = "Events a webhook sink gave up on (dead-lettered)."
)

type viewInstruments struct {
	created metric.Int64Counter
	slots   metric.Int64ObservableGauge
	clock   atomic.Pointer[clock.PassiveClock]
}

// newViewInstruments makes claimstream_claims_created_total and
// claimstream_slots.
func (m *Metrics) newViewInstruments(meter metric.Meter) error {
	m.SetClock(clock.RealClock{})
	var err error
	if m.viewInst.created, err = meter.Int64Counter(InstClaimsCreated, metric.WithDescription(descClaimsCreated)); err != nil {
		return err
	}
	if m.viewInst.slots, err = meter.Int64ObservableGauge(InstSlots,
		metric.WithDescription("Slots by state: off, resting (off after too many failed boots in a row), pending, booting, ready, draining, decommissioned.")); err != nil {
		return err
	}
	_, err = meter.RegisterCallback(m.observeSlots, m.viewInst.slots)
	return err
}

// SetClock sets the clock the slots' resting state is read against (the
// plane's: the simulator's runs faster than the wall).
func (m *Metrics) SetClock(c clock.PassiveClock) { m.viewInst.clock.Store(&c) }

// The requester kinds of claimstream_claims_created_total.
const (
	RequesterClusterAutoscaler = "cluster-autoscaler"
	RequesterBuiltin           = handlers.BuiltinRequester
	RequesterScenario          = "scenario"
	RequesterDashboard         = "dashboard"
	RequesterAPI               = "api"
	RequesterOther             = "other"
)

// Requesters is every value the requester label takes.
var Requesters = []string{RequesterClusterAutoscaler, RequesterBuiltin, RequesterScenario, RequesterDashboard, RequesterAPI, RequesterOther}

// RequesterKind is the requester label of a claim: the kind of caller,
// read from the call that made it. The requester's own text (any token
// holder's --by, a client certificate's name) stays in the event: as a
// label it would make one series per string anyone sends.
func RequesterKind(d events.ClaimCreated) string {
	switch d.Request.Call {
	case events.CallDecide:
		return RequesterBuiltin
	case events.CallIncreaseSize:
		// The provider's calls, or the simulator's scenario (it asks as
		// "scenario"; the provider's requester is its --requested-by,
		// with the client certificate's name under mTLS).
		if d.RequestedBy == RequesterScenario {
			return RequesterScenario
		}
		return RequesterClusterAutoscaler
	case events.CallManual:
		// The dashboard's claims say "dashboard"; every other REST caller
		// is the API (the CLI, scripts).
		if d.RequestedBy == RequesterDashboard {
			return RequesterDashboard
		}
		return RequesterAPI
	}
	return RequesterOther
}

// claimCreated counts one ClaimCreated.
func (m *Metrics) claimCreated(d events.ClaimCreated) {
	m.viewInst.created.Add(context.Background(), 1, metric.WithAttributes(attribute.String("group", d.Group), attribute.String("requester", RequesterKind(d))))
}

func (m *Metrics) observeSlots(_ context.Context, o metric.Observer) error {
	v := m.views.Load()
	if v == nil {
		return nil
	}
	now := (*m.viewInst.clock.Load()).Now()
	counts := map[string]map[string]int64{}
	v.Read(func(s *projections.State) {
		for name, g := range s.Groups {
			if g.Retired {
				continue
			}
			c := map[string]int64{}
			for _, slot := range g.Slots {
				if sl := s.Slots[slot]; sl == nil || sl.Retired {
					continue
				}
				c[string(s.SlotState(slot, now))]++
			}
			counts[name] = c
		}
	})
	groups := make([]string, 0, len(counts))
	for g := range counts {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		for _, st := range projections.SlotStates {
			o.ObserveInt64(m.viewInst.slots, counts[g][string(st)], metric.WithAttributes(attribute.String("group", g), attribute.String("state", string(st))))
		}
	}
	return nil
}

// registerBuildInfo exports claimstream_build_info{version,revision,go_version} 1.
func registerBuildInfo(meter metric.Meter, in buildinfo.Info) error {
	g, err := meter.Int64ObservableGauge(InstBuildInfo, metric.WithDescription("The build of claimstream that runs: version, VCS revision, Go version; always 1."))
	if err != nil {
		return err
	}
	attrs := metric.WithAttributes(attribute.String("version", in.Version), attribute.String("revision", in.Revision), attribute.String("go_version", in.GoVersion))
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, 1, attrs)
		return nil
	}, g)
	return err
}
