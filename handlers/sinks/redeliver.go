package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// DeadLetterEntry is a dead-letter record with its id: its sequence on the
// dead-letter stream, what `claimstream sinks redeliver ID` names.
type DeadLetterEntry struct {
	ID uint64 `json:"id"`
	DeadLetter
}

// ListDeadLetters returns the dead-letter records of sink ("" for every
// sink) with their ids, oldest first.
func (d *Dispatcher) ListDeadLetters(ctx context.Context, sink string) ([]DeadLetterEntry, error) {
	filter := d.Store.Subjects().Prefix + "dl.>"
	if sink != "" {
		filter = DeadLetterSubject(d.Store, sink)
	}
	st, err := d.JS.Stream(ctx, DeadLetterStream(d.Store))
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return []DeadLetterEntry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	out := []DeadLetterEntry{}
	for seq := max(info.State.FirstSeq, 1); seq <= info.State.LastSeq; {
		raw, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("dead-letter stream seq %d: %w", seq, err)
		}
		var r DeadLetter
		if err := json.Unmarshal(raw.Data, &r); err != nil {
			return nil, fmt.Errorf("dead-letter seq %d: %w", raw.Sequence, err)
		}
		r.LastError = RedactText(r.LastError) // a record stored before it was redacted
		out = append(out, DeadLetterEntry{ID: raw.Sequence, DeadLetter: r})
		seq = raw.Sequence + 1
	}
	return out, nil
}

// RedeliverRequest names the dead letters to send again: IDs, or All
// (of Sink, when set).
type RedeliverRequest struct {
	IDs  []uint64 `json:"ids,omitempty"`
	All  bool     `json:"all,omitempty"`
	Sink string   `json:"sink,omitempty"`
}

// RedeliverResult is the outcome of one dead letter: Delivered and removed,
// or kept with Error.
type RedeliverResult struct {
	ID        uint64 `json:"id"`
	Sink      string `json:"sink"`
	EventID   string `json:"eventId"`
	Seq       uint64 `json:"seq"`
	Delivered bool   `json:"delivered"`
	Error     string `json:"error,omitempty"`
}

// ErrBadRedeliver is a request that names nothing or an unknown id or sink.
var ErrBadRedeliver = errors.New("bad redeliver request")

// Redeliver sends the named dead letters' events again, one attempt each,
// through the sink's own sender (URL, mode, headers, timeout), and removes
// a dead letter only once its receiver accepted the event. A failed one is
// kept and reported. Every id must exist and every sink be in the sinks
// file serve runs with, or nothing is sent.
func (d *Dispatcher) Redeliver(ctx context.Context, req RedeliverRequest) ([]RedeliverResult, error) {
	if !req.All && len(req.IDs) == 0 {
		return nil, fmt.Errorf("%w: name dead-letter ids or all", ErrBadRedeliver)
	}
	if req.All && len(req.IDs) > 0 {
		return nil, fmt.Errorf("%w: ids and all exclude each other", ErrBadRedeliver)
	}
	if req.Sink != "" && !slices.ContainsFunc(d.Config.Sinks, func(s Sink) bool { return s.Name == req.Sink }) {
		return nil, fmt.Errorf("%w: sink %q is not in the sinks file serve runs with", ErrBadRedeliver, req.Sink)
	}
	entries, err := d.ListDeadLetters(ctx, req.Sink)
	if err != nil {
		return nil, err
	}
	var chosen []DeadLetterEntry
	for _, id := range req.IDs {
		i := slices.IndexFunc(entries, func(e DeadLetterEntry) bool { return e.ID == id })
		if i < 0 {
			return nil, fmt.Errorf("%w: no dead letter %d (see claimstream sinks dead-letters)", ErrBadRedeliver, id)
		}
		chosen = append(chosen, entries[i])
	}
	if req.All {
		chosen = entries
	}
	senders := map[string]*worker{}
	for _, e := range chosen {
		if _, ok := senders[e.Sink]; ok {
			continue
		}
		i := slices.IndexFunc(d.Config.Sinks, func(s Sink) bool { return s.Name == e.Sink })
		if i < 0 {
			return nil, fmt.Errorf("%w: dead letter %d is of sink %q, which is not in the sinks file serve runs with", ErrBadRedeliver, e.ID, e.Sink)
		}
		s := d.Config.Sinks[i].clone()
		if err := s.normalize(); err != nil {
			return nil, fmt.Errorf("sink %s: %w", s.Name, err)
		}
		w, err := d.newSender(s)
		if err != nil {
			return nil, err
		}
		senders[e.Sink] = w
	}
	st, err := d.JS.Stream(ctx, DeadLetterStream(d.Store))
	if err != nil && len(chosen) > 0 {
		return nil, fmt.Errorf("dead-letter stream: %w", err)
	}
	out := []RedeliverResult{}
	for _, e := range chosen {
		r := RedeliverResult{ID: e.ID, Sink: e.Sink, EventID: e.EventID, Seq: e.Seq}
		if err := d.redeliverOne(ctx, senders[e.Sink], e); err != nil {
			r.Error = err.Error()
			d.Logger.Warn("dead letter not redelivered; kept", "sink", e.Sink, "id", e.ID, "seq", e.Seq, "err", err)
		} else if err := st.DeleteMsg(ctx, e.ID); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			// Delivered, but the record stays: a later redelivery sends it again.
			r.Delivered, r.Error = true, "delivered, but the dead letter could not be removed: "+err.Error()
			d.Logger.Error("dead letter redelivered but not removed", "sink", e.Sink, "id", e.ID, "err", err)
		} else {
			r.Delivered = true
			d.Logger.Info("dead letter redelivered and removed", "sink", e.Sink, "id", e.ID, "seq", e.Seq, "type", e.Type)
			if d.Metrics != nil {
				d.Metrics.Delivered(e.Sink)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// redeliverOne reads the dead letter's event from the log and sends it once.
func (d *Dispatcher) redeliverOne(ctx context.Context, w *worker, e DeadLetterEntry) error {
	ev, err := d.Store.Get(ctx, e.Seq)
	if err != nil {
		return fmt.Errorf("event seq %d: %w", e.Seq, err)
	}
	if ev.Data == nil {
		return fmt.Errorf("event seq %d cannot be read: %v", e.Seq, ev.Err)
	}
	if ev.ID != e.EventID {
		return fmt.Errorf("event seq %d has id %s, the dead letter names %s", e.Seq, ev.ID, e.EventID)
	}
	ce, err := ev.Structured()
	if err != nil {
		return err
	}
	if err := w.send(ctx, ce, ev); err != nil {
		if d.Metrics != nil {
			d.Metrics.DeliveryFailed(e.Sink)
		}
		return err
	}
	return nil
}
