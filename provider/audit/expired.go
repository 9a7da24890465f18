package audit

import (
	"fmt"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
)

// Expiry is what is known of a claim whose first events expired from the
// log: where the log now starts, and the claim as the oldest checkpoint
// still covering the expiry held it.
type Expiry struct {
	// FirstSeq and FirstAt are the log's first remaining event.
	FirstSeq uint64
	FirstAt  time.Time
	// Checkpoint is the checkpoint read (Seq 0: none covers the expiry).
	Checkpoint projections.CheckpointInfo
	// Claim is the claim in that checkpoint (nil: not in it).
	Claim *projections.Claim
}

// Expired tells, as the first line of a claim's story, that its history
// before the log's first sequence expired and what the checkpoint knew of
// it, so the rest of the story is not taken for the whole of it.
func Expired(claim string, x Expiry) Line {
	l := Line{Seq: x.Checkpoint.Seq, At: x.Checkpoint.Time.UTC(), Claim: claim, Type: "checkpoint"}
	head := fmt.Sprintf("history expired: the events before seq %d, older than %s, are no longer in the log", x.FirstSeq, stamp(x.FirstAt))
	switch {
	case x.Checkpoint.Seq == 0:
		l.Text = head + "; no checkpoint holds them, the claim's earlier steps are unknown"
	case x.Claim == nil:
		l.Text = fmt.Sprintf("%s; the checkpoint at seq %d (%s) does not hold the claim: it was collected before then, its story is gone", head, x.Checkpoint.Seq, stamp(x.Checkpoint.Time))
	default:
		c := x.Claim
		l.Text = fmt.Sprintf("%s; last known state from checkpoint at seq %d (%s): %s on slot %s, attempt %d, requested %s by %s (%s)",
			head, x.Checkpoint.Seq, stamp(x.Checkpoint.Time), c.Phase.Normal(), c.Slot, c.Attempt, stamp(c.RequestedAt), orDefault(c.RequestedBy, "unknown"), call(c.Request))
		if c.ReadyAt != nil {
			l.Text += ", ready since " + stamp(*c.ReadyAt)
		}
		if c.Reason != "" {
			l.Text += ", reason " + c.Reason
		}
	}
	return l
}

// HasCreation reports whether evs hold the claim's ClaimCreated: without it
// the story of the claim starts midway.
func HasCreation(evs []events.Event, claim string) bool {
	for _, e := range evs {
		if c, ok := e.Data.(events.ClaimCreated); ok && c.Claim == claim {
			return true
		}
	}
	return false
}
