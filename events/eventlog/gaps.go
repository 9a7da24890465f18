package eventlog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// Gap is a run of sequences the log should hold and does not deliver: the
// stream denies delete and purge, so inside the retention window every
// sequence from the first to the last is an event. A gap means the file
// store lost or dropped records (a truncated or damaged block file).
type Gap struct {
	First, Last uint64
}

// Len is how many sequences the gap spans.
func (g Gap) Len() uint64 { return g.Last - g.First + 1 }

func (g Gap) String() string {
	if g.First == g.Last {
		return strconv.FormatUint(g.First, 10)
	}
	return fmt.Sprintf("%d-%d", g.First, g.Last)
}

// Gaps is a sorted set of disjoint, non-adjacent gaps.
type Gaps []Gap

// Add merges [first, last] into the set and returns the sequences of it
// that were not already in the set.
func (gs *Gaps) Add(first, last uint64) Gaps {
	if first == 0 || last < first {
		return nil
	}
	var fresh Gaps
	next := first
	for _, g := range *gs {
		if g.Last < next || g.First > last {
			continue
		}
		if g.First > next {
			fresh = append(fresh, Gap{next, g.First - 1})
		}
		next = max(next, g.Last+1)
		if next > last {
			break
		}
	}
	if next <= last && next >= first {
		fresh = append(fresh, Gap{next, last})
	}
	merged := append(slices.Clone(*gs), Gap{first, last})
	slices.SortFunc(merged, func(a, b Gap) int {
		switch {
		case a.First < b.First:
			return -1
		case a.First > b.First:
			return 1
		}
		return 0
	})
	out := merged[:0]
	for _, g := range merged {
		if n := len(out); n > 0 && g.First <= out[n-1].Last+1 {
			out[n-1].Last = max(out[n-1].Last, g.Last)
			continue
		}
		out = append(out, g)
	}
	*gs = out
	return fresh
}

// Count is the number of missing sequences.
func (gs Gaps) Count() uint64 {
	var n uint64
	for _, g := range gs {
		n += g.Len()
	}
	return n
}

// String names the missing sequences the way an operator reads them:
// "sequences 16, 88-90 are missing from the log".
func (gs Gaps) String() string {
	if len(gs) == 0 {
		return "no sequences are missing from the log"
	}
	noun, verb := "sequences", "are"
	if len(gs) == 1 && gs[0].First == gs[0].Last {
		noun, verb = "sequence", "is"
	}
	return fmt.Sprintf("%s %s %s missing from the log", noun, gs.Ranges(), verb)
}

// Ranges lists the gaps as "16, 88-90".
func (gs Gaps) Ranges() string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.String()
	}
	return strings.Join(parts, ", ")
}

// GapError is what a read returns when the log did not deliver every
// sequence of the range it was asked for. The read handed every event it
// did get to its caller, in order, before returning it.
type GapError struct {
	Stream string
	Gaps   Gaps
	// Stalled is set when the server stopped delivering before the end of
	// the range (the rest of the range is in Gaps).
	Stalled bool
}

func (e *GapError) Error() string {
	msg := fmt.Sprintf("stream %s: %s", e.Stream, e.Gaps)
	if e.Stalled {
		msg += " (the server stopped delivering)"
	}
	return msg
}

// GapsOf returns the gaps of a *GapError in err's chain, nil for any other
// error.
func GapsOf(err error) Gaps {
	var ge *GapError
	if errors.As(err, &ge) {
		return ge.Gaps
	}
	return nil
}

// gapTracker follows the sequences a reader is delivered and records the
// ones skipped. It is shared by the consumer's goroutine and the reader's
// idle check.
type gapTracker struct {
	mu   sync.Mutex
	next uint64 // the sequence expected next
	gaps Gaps
}

// saw records the delivery of seq; a jump past next is a gap.
func (t *gapTracker) saw(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq > t.next {
		t.gaps.Add(t.next, seq-1)
	}
	if seq >= t.next {
		t.next = seq + 1
	}
}

// missingTo records next..to as missing (the reader ends before them).
func (t *gapTracker) missingTo(to uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if to >= t.next {
		t.gaps.Add(t.next, to)
		t.next = to + 1
	}
}

func (t *gapTracker) expected() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.next
}

func (t *gapTracker) result() Gaps {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.gaps)
}

// StreamDamage is what the stream's own state says the file store lost:
// sequences between its first and last it no longer holds (the stream
// denies delete, so each one is damage) and the data it reports lost.
type StreamDamage struct {
	Deleted   Gaps
	LostMsgs  []uint64
	LostBytes uint64
}

// Empty is true when the stream reports nothing lost.
func (d StreamDamage) Empty() bool {
	return len(d.Deleted) == 0 && len(d.LostMsgs) == 0 && d.LostBytes == 0
}

// Damage reads the stream's state for lost data. A damaged block whose
// index still lists its records is not reported here: only a read meets
// it (Read returns it as a *GapError).
func (s *Store) Damage(ctx context.Context) (StreamDamage, error) {
	st, err := s.js.Stream(ctx, s.cfg.Stream)
	if err != nil {
		return StreamDamage{}, fmt.Errorf("stream %s: %w", s.cfg.Stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return StreamDamage{}, fmt.Errorf("stream %s info: %w", s.cfg.Stream, err)
	}
	var d StreamDamage
	for _, seq := range info.State.Deleted {
		d.Deleted.Add(seq, seq)
	}
	if l := info.State.Lost; l != nil {
		d.LostMsgs, d.LostBytes = l.Msgs, l.Bytes
	}
	return d, nil
}
