package decide_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/decide/decidetest"
	"github.com/claimstream/claimstream/projections"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/")

var t0 = time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)

// pool is an in-memory log: it appends a decider's writes the way the
// store does (checking every expectation) and folds them with Evolve.
type pool struct {
	s   *projections.State
	seq uint64
	now time.Time
}

func newPool() *pool { return &pool{s: projections.NewState(), now: t0} }

// append checks the expectations and folds the events.
func (p *pool) append(writes []events.Write) ([]events.Event, error) {
	for _, w := range writes {
		var last uint64
		switch w.Aggregate.Kind {
		case events.KindSlot:
			if sl := p.s.Slots[w.Aggregate.Name]; sl != nil {
				last = sl.Seq
			}
		case events.KindGroup:
			if g := p.s.Groups[w.Aggregate.Name]; g != nil {
				last = g.Seq
			}
		}
		if last != w.Expected {
			return nil, fmt.Errorf("write to %s expects seq %d, the log has %d", w.Aggregate, w.Expected, last)
		}
	}
	var out []events.Event
	for _, w := range writes {
		for _, e := range w.Events {
			p.seq++
			e.Seq, e.Type, e.Aggregate = p.seq, e.Data.EventType(), w.Aggregate
			if err := projections.Evolve(p.s, e); err != nil {
				return out, fmt.Errorf("decider wrote an event the model refuses: %w", err)
			}
			out = append(out, e)
		}
	}
	return out, nil
}

func (p *pool) exec(cmd decide.Command) ([]events.Event, error) {
	writes, err := cmd.Decide(p.s, p.now)
	if err != nil {
		return nil, err
	}
	return p.append(writes)
}

// declare adds a group with slots, as the pool reconciler would.
func (p *pool) declare(group string, spec events.GroupSpec, slots []string) error {
	var ws []events.Write
	if g := p.s.Groups[group]; g == nil || g.Retired {
		ws = append(ws, events.Write{Aggregate: events.GroupAggregate(group), Expected: seqOfGroup(p.s, group), Events: []events.Event{{Time: p.now, Data: events.GroupDeclared{Ref: events.Ref{Group: group, Cause: "test"}, Spec: spec}}}})
	}
	for _, sl := range slots {
		ws = append(ws, events.Write{Aggregate: events.SlotAggregate(sl), Expected: seqOfSlot(p.s, sl), Events: []events.Event{{Time: p.now, Data: events.SlotDeclared{Ref: events.Ref{Slot: sl, Group: group, Cause: "test"}}}}})
	}
	_, err := p.append(ws)
	return err
}

func seqOfGroup(s *projections.State, g string) uint64 {
	if x := s.Groups[g]; x != nil {
		return x.Seq
	}
	return 0
}

func seqOfSlot(s *projections.State, sl string) uint64 {
	if x := s.Slots[sl]; x != nil {
		return x.Seq
	}
	return 0
}

// TestScenarios runs the scripts in testdata/scenarios: each line is a
// command, its output is appended to the transcript, and the invariants are
// checked after every line. The transcript must match the .golden file
// (go test ./handlers/decide -run TestScenarios -update rewrites them).
func TestScenarios(t *testing.T) {
	files, _ := filepath.Glob("testdata/scenarios/*.txt")
	if len(files) == 0 {
		t.Fatal("no scenarios")
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			got := runScenario(t, file)
			golden := strings.TrimSuffix(file, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("transcript differs from %s:\n%s", golden, decidetest.Diff(string(want), got))
			}
		})
	}
}

func runScenario(t *testing.T, file string) string {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := newPool()
	var out strings.Builder
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			out.WriteString(sc.Text() + "\n")
			continue
		}
		out.WriteString("> " + text + "\n")
		res, err := p.run(text)
		if err != nil {
			t.Fatalf("%s:%d: %v", file, line, err)
		}
		for _, l := range res {
			out.WriteString("  " + l + "\n")
		}
		if err := decidetest.CheckInvariants(p.s); err != nil {
			t.Fatalf("%s:%d: after %q: %v", file, line, text, err)
		}
	}
	return out.String()
}

// args parses "key=value" words after the verb.
func args(words []string) map[string]string {
	m := map[string]string{}
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		m[k] = v
	}
	return m
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// run executes one script line and returns the transcript lines.
func (p *pool) run(text string) ([]string, error) {
	words := strings.Fields(text)
	verb, a := words[0], args(words[1:])
	var cmd decide.Command
	switch verb {
	case "group":
		spec := events.GroupSpec{MinSize: atoi(a["min"]), MaxSize: atoi(a["max"]), Scaler: events.ScalerClusterAutoscaler}
		if a["provision"] != "" {
			d, err := time.ParseDuration(a["provision"])
			if err != nil {
				return nil, err
			}
			spec.MaxNodeProvisionTime = events.Duration(d)
		}
		if err := p.declare(a["name"], spec, strings.Split(a["slots"], ",")); err != nil {
			return nil, err
		}
		return []string{"declared"}, nil
	case "advance":
		d, err := time.ParseDuration(words[1])
		if err != nil {
			return nil, err
		}
		p.now = p.now.Add(d)
		return []string{"now +" + p.now.Sub(t0).String()}, nil
	case "show":
		return p.show(), nil
	case "failures":
		// The failed instances cluster-autoscaler is told about.
		var lines []string
		for _, sl := range p.s.Groups[a["group"]].Slots {
			if c := p.s.ListedFailure(sl, p.now); c != nil {
				lines = append(lines, fmt.Sprintf("failed instance slot=%s attempt=%d reason=%s", sl, c.Attempt, c.Reason))
			}
		}
		if len(lines) == 0 {
			lines = []string{"no failed instance listed"}
		}
		return lines, nil
	case "increase":
		cmd = decide.IncreaseSize{Group: a["group"], Delta: atoi(a["delta"]), RequestedBy: a["by"]}
	case "decrease":
		cmd = decide.DecreaseTargetSize{Group: a["group"], Delta: atoi(a["delta"]), RequestedBy: a["by"]}
	case "delete":
		var nodes []decide.NodeRef
		for _, n := range strings.Split(a["nodes"], ",") {
			name, pid, _ := strings.Cut(n, "|")
			nodes = append(nodes, decide.NodeRef{Name: name, ProviderID: pid})
		}
		if a["nodes"] == "" {
			nodes = nil
		}
		cmd = decide.DeleteNodes{Group: a["group"], Nodes: nodes, RequestedBy: a["by"]}
	case "manual":
		cmd = decide.ManualClaim{Slot: a["slot"], By: a["by"], Reason: a["reason"]}
	case "delclaim":
		cmd = decide.DeleteClaim{Claim: p.claimOf(a["slot"]), By: a["by"]}
	case "decommission":
		cmd = decide.Decommission{Slot: a["slot"], By: a["by"], Reason: a["reason"]}
	case "recommission":
		cmd = decide.Recommission{Slot: a["slot"], By: a["by"]}
	case "boot":
		cmd = decide.BootClaim{Claim: p.claimOf(a["slot"])}
	case "ready":
		cmd = decide.MarkReady{Claim: p.claimOf(a["slot"]), Node: a["slot"]}
	case "fail":
		cmd = decide.FailClaim{Claim: p.claimOf(a["slot"]), Reason: a["reason"], ForceShutdown: a["force"] == "true"}
	case "expire":
		cmd = decide.ExpireDeadline{Claim: p.claimOf(a["slot"])}
	case "complete":
		cmd = decide.CompleteClaim{Claim: p.claimOf(a["slot"])}
	case "collect":
		cmd = decide.CollectClaim{Claim: p.newestOf(a["slot"])}
	case "merge":
		// A ClaimCreated from another log (a merge, a hand-written entry):
		// appended with the slot's current sequence, whatever it holds.
		return p.merge(a["slot"], a["claim"], a["by"])
	default:
		return nil, fmt.Errorf("unknown verb %q", verb)
	}
	evs, err := p.exec(cmd)
	if err != nil {
		if code := decide.CodeOf(err); code != 0 {
			return []string{fmt.Sprintf("error %s: %v", code, err)}, nil
		}
		return nil, err
	}
	if len(evs) == 0 {
		return []string{"no change"}, nil
	}
	var lines []string
	for _, e := range evs {
		lines = append(lines, describe(e))
	}
	return lines, nil
}

// merge appends a ClaimCreated for slot as a merged log would hold it: no
// decider saw it, so nothing checked the slot was free.
func (p *pool) merge(slot, claim, by string) ([]string, error) {
	sl := p.s.Slots[slot]
	if sl == nil {
		return nil, fmt.Errorf("merge: no slot %s", slot)
	}
	g := p.s.Groups[sl.Group]
	ev := events.ClaimCreated{
		Ref:         events.Ref{Claim: claim, Slot: slot, Group: sl.Group, Attempt: 1, Cause: "merged from another log by " + by},
		RequestedAt: p.now, RequestedBy: by, Request: events.Request{Call: events.CallManual, Group: sl.Group},
		DeadlineAt: projections.DeadlineAt(p.now, g.Spec), TTL: events.Duration(time.Hour),
	}
	evs, err := p.append([]events.Write{{Aggregate: events.SlotAggregate(slot), Expected: sl.Seq, Events: []events.Event{{Time: p.now, Data: ev}}}})
	if err != nil {
		return nil, err
	}
	var lines []string
	for _, e := range evs {
		lines = append(lines, describe(e))
	}
	for _, name := range sl.Claims {
		c := p.s.Claims[name]
		if c == nil || len(c.Timeline) == 0 || len(evs) == 0 {
			continue
		}
		if st := c.Timeline[len(c.Timeline)-1]; st.Seq == evs[0].Seq && st.Type == events.TypeClaimSuperseded {
			lines = append(lines, fmt.Sprintf("  %s: %s/%s, %s", st.Type, c.Phase, c.Reason, st.Detail))
		}
	}
	return lines, nil
}

func (p *pool) claimOf(slot string) string {
	if c := p.s.LiveOfSlot(slot); c != nil {
		return c.Name
	}
	return p.newestOf(slot)
}

func (p *pool) newestOf(slot string) string {
	if sl := p.s.Slots[slot]; sl != nil && len(sl.Claims) > 0 {
		return sl.Claims[len(sl.Claims)-1]
	}
	return "none"
}

// describe prints an event without its generated names, so the transcript
// reads by slot.
func describe(e events.Event) string {
	r := e.Data.Reference()
	s := fmt.Sprintf("%s slot=%s", e.Type, r.Slot)
	if e.Aggregate.Kind == events.KindGroup {
		s = fmt.Sprintf("%s group=%s", e.Type, r.Group)
	}
	if r.Attempt != 0 {
		s += fmt.Sprintf(" attempt=%d", r.Attempt)
	}
	switch d := e.Data.(type) {
	case events.ClaimCreated:
		s += fmt.Sprintf(" by=%s call=%s deadline=+%s", d.RequestedBy, d.Request.Call, d.DeadlineAt.Sub(d.RequestedAt))
	case events.ClaimFailed:
		s += fmt.Sprintf(" reason=%s force=%v", d.Reason, d.ForceShutdown)
	case events.ClaimCancelled:
		s += " reason=" + d.Reason
	case events.ClaimCompleted:
		s += " reason=" + d.Reason
	case events.ScaleDownRequested:
		s += fmt.Sprintf(" call=%s nodes=%s", d.Request.Call, strings.Join(d.Request.Nodes, ","))
	case events.FailedInstanceDeleted:
		s += fmt.Sprintf(" by=%s call=%s nodes=%s", d.RequestedBy, d.Request.Call, strings.Join(d.Request.Nodes, ","))
	case events.SizeIncreased:
		s += fmt.Sprintf(" delta=+%d by=%s call=%s claims=%d", d.Delta, d.RequestedBy, d.Request.Call, len(d.Claims))
	case events.SizeDecreased:
		s += fmt.Sprintf(" delta=-%d by=%s call=%s claims=%d", d.Delta, d.RequestedBy, d.Request.Call, len(d.Claims))
	}
	return s + " cause=" + strconvQuote(r.Cause)
}

func strconvQuote(s string) string { return strconv.Quote(s) }

func (p *pool) show() []string {
	var lines []string
	groups := make([]string, 0, len(p.s.Groups))
	for g := range p.s.Groups {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		lines = append(lines, fmt.Sprintf("group %s target=%d max=%d claimed=%d free=%d", g, p.s.TargetSize(g), p.s.MaxSize(g), len(p.s.ClaimedSlots(g)), len(p.s.FreeSlots(g, p.now))))
		for _, sl := range p.s.Groups[g].Slots {
			line := fmt.Sprintf("  slot %s phase=%s next-attempt=%d", sl, p.s.SlotPhase(sl), p.s.NextAttempt(sl, p.now))
			if c := p.s.LiveOfSlot(sl); c != nil {
				line += fmt.Sprintf(" live=%s attempt=%d", c.Phase.Normal(), c.Attempt)
				if c.ScaleDown != nil {
					line += " marked"
				}
				if c.DeadlineAt != nil {
					line += " deadline=+" + c.DeadlineAt.Sub(t0).String()
				}
			}
			if d := p.s.Slots[sl].LastClaim; d != nil {
				line += fmt.Sprintf(" last=%s/%d", d.Phase, d.Attempt)
				if d.Reason != "" {
					line += "/" + d.Reason
				}
			}
			lines = append(lines, line)
		}
	}
	return lines
}
