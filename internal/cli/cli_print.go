package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/scale"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/audit"
	"github.com/claimstream/claimstream/provider/rest"
)

func marshalIndent(v any) ([]byte, error)  { return json.MarshalIndent(v, "", "  ") }
func marshalCompact(v any) ([]byte, error) { return json.Marshal(v) }

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 3, ' ', 0) }

func row(tw io.Writer, cols ...string) {
	for i, c := range cols {
		if c == "" {
			c = "-"
		}
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c)
	}
	fmt.Fprintln(tw)
}

// age is a kubectl-style age: 45s, 12m, 3h12m, 4d.
// A negative duration (a time the server stamped ahead of the clock it
// is measured against) reads 0s: an age is never negative.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		m, s := int(d.Minutes()), int(d.Seconds())%60
		if s == 0 {
			return fmt.Sprintf("%dm", m)
		}
		return fmt.Sprintf("%dm%ds", m, s)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		h, m := int(d.Hours()), int(d.Minutes())%60
		if m == 0 {
			return fmt.Sprintf("%dh", h)
		}
		return fmt.Sprintf("%dh%dm", h, m)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func deadline(c rest.Claim, now time.Time) string {
	if c.DeadlineAt == nil || !c.Phase.InBootWindow() {
		return ""
	}
	if d := c.DeadlineAt.Sub(now); d >= 0 {
		return "in " + age(d)
	}
	return "overdue " + age(now.Sub(*c.DeadlineAt))
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func stampp(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}

func phases(m map[projections.SlotPhase]int) string {
	var keys []string
	for k, n := range m {
		if n > 0 {
			keys = append(keys, fmt.Sprintf("%s=%d", k, n))
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

func groupTable(w io.Writer, gs []rest.Group, wide, head bool) error {
	tw := table(w)
	switch {
	case !head:
	case wide:
		row(tw, "NAME", "SCALER", "MIN", "MAX", "TARGET", "LIVE", "SLOTS", "FREE", "SLOT-PHASES", "BUDGET")
	default:
		row(tw, "NAME", "SCALER", "MIN", "MAX", "TARGET", "LIVE", "SLOTS")
	}
	for _, g := range gs {
		cols := []string{g.Name, g.Spec.Scaler, fmt.Sprint(g.Spec.MinSize), fmt.Sprint(g.EffectiveMaxSize), fmt.Sprint(g.TargetSize), fmt.Sprint(g.Live), fmt.Sprint(len(g.Slots))}
		if wide {
			cols = append(cols, fmt.Sprint(g.Free), phases(g.SlotPhases), projections.BootWindow(g.Spec).String())
		}
		row(tw, cols...)
	}
	return tw.Flush()
}

func digest(d *projections.Digest) string {
	if d == nil {
		return ""
	}
	s := fmt.Sprintf("%s %s #%d", d.Claim, d.Phase, d.Attempt)
	if d.Reason != "" {
		s += " " + d.Reason
	}
	return s
}

func nodeState(s rest.Slot) string {
	n := s.Node
	if !n.Present {
		return "absent"
	}
	out := "NotReady"
	if n.Ready {
		out = "Ready"
	}
	if n.Unschedulable {
		out += ",cordoned"
	}
	if n.ToBeDeleted {
		out += ",ToBeDeleted"
	}
	return out
}

func slotTable(w io.Writer, ss []rest.Slot, wide, head bool, now time.Time) error {
	tw := table(w)
	switch {
	case !head:
	case wide:
		row(tw, "NAME", "GROUP", "PHASE", "CLAIM", "NODE", "LAST-CLAIM", "PROVIDER-ID", "NEXT-ATTEMPT", "DECOMMISSIONED", "LAST-SHUTDOWN")
	default:
		row(tw, "NAME", "GROUP", "PHASE", "CLAIM", "NODE", "LAST-CLAIM")
	}
	for _, s := range ss {
		cols := []string{s.Name, s.Group, string(s.Phase), s.LiveClaim, nodeState(s), digest(s.LastClaim)}
		if wide {
			dec := ""
			if s.Decommissioned != nil {
				dec = s.Decommissioned.By + " " + age(now.Sub(s.Decommissioned.At)) + " ago"
			}
			sh := ""
			if s.LastShutdown != nil {
				sh = s.LastShutdown.Job + " " + age(now.Sub(s.LastShutdown.At)) + " ago"
			}
			cols = append(cols, s.ProviderID, fmt.Sprint(s.NextAttempt), dec, sh)
		}
		row(tw, cols...)
	}
	return tw.Flush()
}

func claimTable(w io.Writer, cs []rest.Claim, wide, withHeader bool, now time.Time) error {
	tw := table(w)
	head := []string{"NAME", "SLOT", "GROUP", "PHASE", "ATTEMPT", "REASON", "REQUESTED-BY", "AGE", "DEADLINE"}
	if wide {
		head = append(head, "CALL", "STARTUP-JOB", "NODE", "SCALE-DOWN", "SHUTDOWNS")
	}
	if withHeader {
		row(tw, head...)
	}
	for _, c := range cs {
		cols := []string{c.Name, c.Slot, c.Group, string(c.Phase.Normal()), fmt.Sprint(c.Attempt), c.Reason, c.RequestedBy, age(now.Sub(c.RequestedAt)), deadline(c, now)}
		if wide {
			sd := ""
			if c.ScaleDown != nil {
				sd = c.ScaleDown.Request.Call + " by " + c.ScaleDown.RequestedBy
			}
			cols = append(cols, callOf(c), c.StartupJob, c.Node, sd, fmt.Sprint(c.ShutdownAttempts))
		}
		row(tw, cols...)
	}
	return tw.Flush()
}

func callOf(c rest.Claim) string {
	r := c.Request
	switch {
	case r.Delta > 0:
		return fmt.Sprintf("%s(+%d)", r.Call, r.Delta)
	case r.Delta < 0:
		return fmt.Sprintf("%s(%d)", r.Call, r.Delta)
	}
	return r.Call
}

// --- describe -------------------------------------------------------------------

type kv struct {
	w      io.Writer
	indent string
}

func (k kv) line(key, val string) {
	if val == "" {
		val = "<none>"
	}
	fmt.Fprintf(k.w, "%s%-22s %s\n", k.indent, key+":", val)
}

func describeGroup(w io.Writer, g rest.Group, slots []rest.Slot, now time.Time) error {
	k := kv{w: w}
	k.line("Name", g.Name)
	k.line("Scaler", g.Spec.Scaler)
	k.line("Min size", fmt.Sprint(g.Spec.MinSize))
	k.line("Max size", fmt.Sprintf("%d (declared %d)", g.EffectiveMaxSize, g.Spec.MaxSize))
	k.line("Target size", fmt.Sprint(g.TargetSize))
	k.line("Live claims", fmt.Sprint(g.Live))
	k.line("Free slots", fmt.Sprint(g.Free))
	k.line("Slot phases", phases(g.SlotPhases))
	t := projections.TimeoutsOf(g.Spec.Lifecycle)
	k.line("Boot window", fmt.Sprintf("%s (budget %s, maxNodeProvisionTime %s)", projections.BootWindow(g.Spec), t.Budget(), g.Spec.MaxNodeProvisionTime))
	k.line("Lifecycle", fmt.Sprintf("job %s, registration %s, readiness gate %s", t.JobTimeout, t.RegistrationWait, t.ReadinessGate))
	k.line("Claim TTL", projections.ClaimTTL(g.Spec).String())
	if g.Retired {
		k.line("Retired", "yes")
	}
	if d := g.LastDecision; d != nil {
		line := fmt.Sprintf("%s %s (demand %d, target %d, nodes %d): %s", stamp(d.At), d.Action, d.Demand, d.Target, d.Nodes, d.Reason)
		if len(d.Slots) > 0 {
			line += " [" + strings.Join(d.Slots, ", ") + "]"
		}
		k.line("Last scale decision", line)
	}
	if b := g.Spec.Builtin; g.Spec.Scaler == events.ScalerBuiltin {
		o := scale.OptionsOf(b)
		k.line("Built-in scaler", fmt.Sprintf("%d pods a node, max %d nodes, hold %s", o.PodsPerNodeOrDefault(), o.MaxNodesOrDefault(), o.HoldOrDefault()))
	}
	if g.Spec.DrainTimeout > 0 || g.Spec.OnDrainTimeout != "" {
		dt, dp := handlers.DrainSettings(g.Spec)
		k.line("Drain", fmt.Sprintf("timeout %s, then %s", dt, dp))
	}
	fmt.Fprintln(w, "Slots:")
	if len(slots) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw := table(w)
	row(tw, "  NAME", "PHASE", "CLAIM", "NODE", "LAST-CLAIM")
	for _, s := range slots {
		row(tw, "  "+s.Name, string(s.Phase), s.LiveClaim, nodeState(s), digest(s.LastClaim))
	}
	return tw.Flush()
}

func describeSlot(w io.Writer, s rest.Slot, claims []rest.Claim, now time.Time) error {
	k := kv{w: w}
	k.line("Name", s.Name)
	k.line("Group", s.Group)
	k.line("Phase", string(s.Phase))
	k.line("Provider ID", s.ProviderID)
	if s.Spec.Address != "" {
		k.line("Address", s.Spec.Address)
	}
	k.line("Live claim", s.LiveClaim)
	k.line("Next attempt", fmt.Sprint(s.NextAttempt))
	if s.Decommissioned != nil {
		k.line("Decommissioned", fmt.Sprintf("by %s at %s: %s", s.Decommissioned.By, stamp(s.Decommissioned.At), s.Decommissioned.Reason))
	}
	if s.Retired {
		k.line("Retired", "yes")
	}
	node := nodeState(s)
	if s.Node.Name != "" {
		node = s.Node.Name + " " + node
	}
	if !s.NodeObservedAt.IsZero() {
		node += " (observed " + stamp(s.NodeObservedAt) + ")"
	}
	k.line("Node", node)
	k.line("Sequence", fmt.Sprint(s.Seq))
	fmt.Fprintln(w, "Last claim:")
	if d := s.LastClaim; d != nil {
		dk := kv{w: w, indent: "  "}
		dk.line("Claim", d.Claim)
		dk.line("Phase", string(d.Phase))
		dk.line("Attempt", fmt.Sprint(d.Attempt))
		dk.line("Requested", fmt.Sprintf("%s by %s via %s for group %s", stamp(d.RequestedAt), d.RequestedBy, d.Call, d.Group))
		dk.line("Reason", d.Reason)
		dk.line("Deadline", stampp(d.DeadlineAt))
		dk.line("Finished", stampp(d.FinishedAt))
		dk.line("Booted", yesNo(d.Booted))
		dk.line("Reached ready", yesNo(d.ReachedReady))
	} else {
		fmt.Fprintln(w, "  <none>")
	}
	if sh := s.LastShutdown; sh != nil {
		k.line("Last shutdown", fmt.Sprintf("Job %s at %s (claim %s, attempt %d, force %v): %s", sh.Job, stamp(sh.At), first(sh.Claim, "-"), sh.Attempt, sh.Force, sh.Cause))
	}
	if j := s.LastJoinRefused; j != nil {
		k.line("Last join refused", fmt.Sprintf("host %s at %s: %s", j.By, stamp(j.At), j.Reason))
	}
	fmt.Fprintln(w, "Claims in the views:")
	if len(claims) == 0 {
		fmt.Fprintln(w, "  <none>")
	} else {
		tw := table(w)
		row(tw, "  NAME", "PHASE", "ATTEMPT", "REASON", "AGE")
		for _, c := range claims {
			row(tw, "  "+c.Name, string(c.Phase.Normal()), fmt.Sprint(c.Attempt), c.Reason, age(now.Sub(c.RequestedAt)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	var steps []stepOf
	for _, c := range claims {
		for _, st := range c.Timeline {
			steps = append(steps, stepOf{c.Name, st})
		}
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].Seq < steps[j].Seq })
	if len(steps) > 10 {
		steps = steps[len(steps)-10:]
	}
	fmt.Fprintln(w, "Recent timeline:")
	return timeline(w, steps, true)
}

type stepOf struct {
	claim string
	projections.Step
}

func timeline(w io.Writer, steps []stepOf, withClaim bool) error {
	if len(steps) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw := table(w)
	head := []string{"  SEQ", "AT", "TYPE", "PHASE", "DETAIL", "CAUSE"}
	if withClaim {
		head = append([]string{"  CLAIM"}, head...)
		head[1] = "SEQ"
	}
	row(tw, head...)
	for _, s := range steps {
		cols := []string{fmt.Sprint(s.Seq), stamp(s.At), string(s.Type), string(s.Phase), s.Detail, s.Cause}
		if withClaim {
			cols = append([]string{s.claim}, cols...)
		}
		cols[0] = "  " + cols[0]
		row(tw, cols...)
	}
	return tw.Flush()
}

func describeClaim(w io.Writer, c rest.Claim, now time.Time) error {
	k := kv{w: w}
	k.line("Name", c.Name)
	k.line("Slot", c.Slot)
	k.line("Group", c.Group)
	k.line("Phase", string(c.Phase.Normal()))
	k.line("Attempt", fmt.Sprint(c.Attempt))
	k.line("Reason", c.Reason)
	if c.Message != "" {
		k.line("Message", c.Message)
	}
	req := fmt.Sprintf("%s by %s via %s (%s ago)", stamp(c.RequestedAt), c.RequestedBy, callOf(c), age(now.Sub(c.RequestedAt)))
	if len(c.Request.Nodes) > 0 {
		req += " nodes " + strings.Join(c.Request.Nodes, ",")
	}
	k.line("Requested", req)
	dl := stampp(c.DeadlineAt)
	if left := deadline(c, now); left != "" {
		dl += " (" + left + ")"
	} else if dl != "" && c.Phase.IsTerminal() {
		dl += " (no longer watched: the claim ended)"
	}
	k.line("Deadline", dl)
	k.line("Budget", fmt.Sprintf("%s (maxNodeProvisionTime %s)", c.Budget, c.MaxNodeProvisionTime))
	k.line("TTL", c.TTL.String())
	k.line("Startup Job", c.StartupJob)
	k.line("Boot committed", stampp(c.BootCommittedAt))
	k.line("Ready", stampp(c.ReadyAt))
	k.line("Node", c.Node)
	k.line("Finished", stampp(c.FinishedAt))
	k.line("Force shutdown", yesNo(c.ForceShutdown))
	if sd := c.ScaleDown; sd != nil {
		k.line("Scale-down", fmt.Sprintf("%s by %s via %s: %s", stamp(sd.At), sd.RequestedBy, sd.Request.Call, sd.Reason))
	}
	if c.LastShutdownJob != "" {
		k.line("Shutdowns", fmt.Sprintf("%d of %d, last Job %s at %s", c.ShutdownAttempts, projections.ShutdownAttemptLimit, c.LastShutdownJob, stampp(c.LastShutdownAttemptAt)))
	}
	if c.ShutdownPausedUntil != nil {
		k.line("Shutdown paused until", stampp(c.ShutdownPausedUntil))
	}
	if c.MachineOffSince != nil {
		k.line("Machine off since", stampp(c.MachineOffSince))
	}
	if e := c.Expected; e != nil {
		host := fmt.Sprintf("%s (providerID %s", e.Node, e.ProviderID)
		if e.InstanceID != "" {
			host += ", instance " + e.InstanceID
		}
		if e.Address != "" {
			host += ", address " + e.Address
		}
		k.line("Expected host", host+") by "+stamp(e.DeadlineAt))
	}
	if j := c.Joined; j != nil {
		k.line("Host joined", fmt.Sprintf("%s at %s (matched by %s)", j.Node, stamp(j.At), j.MatchedBy))
	}
	if d := c.Drain; d != nil {
		line := fmt.Sprintf("%s since %s, %d pods, timeout %s, then %s", d.Node, stamp(d.StartedAt), len(d.Pods), d.Timeout, d.Policy)
		if d.TimedOutAt != nil {
			line += fmt.Sprintf("; timed out at %s with %d left", stamp(*d.TimedOutAt), len(d.Remaining))
		}
		k.line("Drain", line)
	}
	fmt.Fprintln(w, "Timeline:")
	steps := make([]stepOf, 0, len(c.Timeline))
	for _, s := range c.Timeline {
		steps = append(steps, stepOf{c.Name, s})
	}
	return timeline(w, steps, false)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// --- events and audit -----------------------------------------------------------

// Event rows are written with fixed widths, not a tabwriter, so a followed
// stream prints each line as it arrives.
func eventHeader(w io.Writer, wide bool) {
	if wide {
		fmt.Fprintf(w, "%-7s %-20s %-28s %-12s %-20s %-26s %-7s %s\n", "SEQ", "TIME", "TYPE", "GROUP", "SLOT", "CLAIM", "ATTEMPT", "CAUSE")
		return
	}
	fmt.Fprintf(w, "%-7s %-20s %-28s %-20s %-26s %s\n", "SEQ", "TIME", "TYPE", "SLOT", "CLAIM", "CAUSE")
}

func eventRow(w io.Writer, e rest.Event, wide bool) {
	cause := e.Cause
	if e.Error != "" {
		cause = "unreadable: " + e.Error
	}
	d := func(s string) string { return first(s, "-") }
	if wide {
		fmt.Fprintf(w, "%-7d %-20s %-28s %-12s %-20s %-26s %-7d %s\n", e.Seq, stamp(e.Time), e.Type, d(e.Group), d(e.Slot), d(e.Claim), e.Attempt, d(cause))
		return
	}
	fmt.Fprintf(w, "%-7d %-20s %-28s %-20s %-26s %s\n", e.Seq, stamp(e.Time), e.Type, d(e.Slot), d(e.Claim), d(cause))
}

func printAudit(w io.Writer, a rest.Audit) error {
	if a.Claim != "" {
		fmt.Fprintf(w, "Claim %s on slot %s (group %s), %s\n", a.Claim, a.Slot, a.Group, count(len(a.Lines), "event"))
	} else {
		fmt.Fprintf(w, "Slot %s (group %s), %s, %s: %s\n", a.Slot, a.Group, count(len(a.Lines), "event"), count(len(a.Claims), "claim"), strings.Join(a.Claims, ", "))
	}
	_, err := io.WriteString(w, audit.Render(a.Lines))
	return err
}

// count is "1 claim", "2 claims", "0 claims".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
