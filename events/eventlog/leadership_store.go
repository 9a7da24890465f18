package eventlog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
)

// ErrNoEvent: the aggregate has no event yet.
var ErrNoEvent = errors.New("no event on the aggregate")

// LastFromLeader reads the newest event of agg through the stream's leader
// ($JS.API.STREAM.MSG.GET), never a direct get, which any replica of the
// stream answers and which may lag: the proof a leader asks for before it
// acts must see what the stream has acknowledged.
func (s *Store) LastFromLeader(ctx context.Context, agg events.Aggregate) (events.Event, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	m, err := s.getFromLeader(ctx, struct {
		LastFor string `json:"last_by_subj"`
	}{s.subjects.Filter(agg)}, "the last event of "+agg.String())
	if err != nil {
		return events.Event{}, err
	}
	return s.decode(m.Subject, m.Seq, m.Header, m.Data), nil
}

// leaderMsg is one message as the stream's leader answered a get.
type leaderMsg struct {
	Subject string
	Seq     uint64
	Header  nats.Header
	Data    []byte
}

// getFromLeader asks the stream's leader for the message req names
// (what, in errors): ErrNoEvent when there is none.
func (s *Store) getFromLeader(ctx context.Context, req any, what string) (leaderMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return leaderMsg{}, err
	}
	m, err := s.js.Conn().RequestWithContext(ctx, jetstream.DefaultAPIPrefix+"STREAM.MSG.GET."+s.cfg.Stream, body)
	if err != nil {
		return leaderMsg{}, fmt.Errorf("read %s from the stream leader: %w", what, err)
	}
	var resp struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error,omitempty"`
		Message *struct {
			Subject  string `json:"subject"`
			Sequence uint64 `json:"seq"`
			Header   []byte `json:"hdrs,omitempty"`
			Data     []byte `json:"data,omitempty"`
		} `json:"message,omitempty"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return leaderMsg{}, fmt.Errorf("read %s: %w", what, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrCode == int(jetstream.JSErrCodeMessageNotFound) {
			return leaderMsg{}, ErrNoEvent
		}
		return leaderMsg{}, fmt.Errorf("read %s: %s (code %d)", what, resp.Error.Description, resp.Error.ErrCode)
	}
	if resp.Message == nil {
		return leaderMsg{}, fmt.Errorf("read %s: empty answer", what)
	}
	out := leaderMsg{Subject: resp.Message.Subject, Seq: resp.Message.Sequence, Data: resp.Message.Data}
	if len(resp.Message.Header) > 0 {
		if out.Header, err = nats.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return leaderMsg{}, fmt.Errorf("read %s: headers: %w", what, err)
		}
	}
	return out, nil
}
