package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KindLeadership: the replicas' leadership. One aggregate (Leadership), so
// every LeaderElected is appended with the expectation of the last one: two
// replicas cannot both win one epoch.
const KindLeadership AggregateKind = "leadership"

// LeadershipName is the name of the one leadership aggregate.
const LeadershipName = "claimstream"

// Leadership is the aggregate of LeaderElected.
func Leadership() Aggregate { return Aggregate{Kind: KindLeadership, Name: LeadershipName} }

// TypeLeaderElected: a replica won the leader lease and leads the next
// epoch; it appends this before any leader-only work.
const TypeLeaderElected Type = "LeaderElected"

// LeaderElected: Replica won the lease and leads Epoch (the previous
// epoch + 1). Its provider and REST API answer on the addresses.
type LeaderElected struct {
	Replica     string `json:"replica"`
	Epoch       uint64 `json:"epoch"`
	GRPCAddress string `json:"grpcAddress,omitempty"`
	APIAddress  string `json:"apiAddress,omitempty"`
	// Cause says how the lease was won ("Lease claimstream/claimstream",
	// "key-value lease claimstream-leader").
	Cause string `json:"cause"`
}

// EventType is LeaderElected.
func (LeaderElected) EventType() Type { return TypeLeaderElected }

// Reference names no group, slot or claim: leadership is the process's.
func (d LeaderElected) Reference() Ref { return Ref{Cause: d.Cause} }

// ceSubjectOf is the CloudEvents subject of d: the replica for a
// leadership event, else the claim, slot or group (ceSubject).
func ceSubjectOf(d Data) string {
	if l, ok := d.(LeaderElected); ok {
		return l.Replica
	}
	return ceSubject(d.Reference())
}

// HeaderEpoch carries the leadership epoch of the replica that wrote the
// event (the CloudEvents extension leaderepoch). Events written before
// leadership epochs existed have none (Event.Epoch 0).
const HeaderEpoch = "ce-leaderepoch"

// parseEpoch reads HeaderEpoch: absent is 0, anything but a decimal
// uint64 is refused.
func parseEpoch(v string) (uint64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: want a decimal epoch", HeaderEpoch, v)
	}
	return n, nil
}

// ErrNoEvent: the aggregate has no event yet.
var ErrNoEvent = errors.New("no event on the aggregate")

// LastFromLeader reads the newest event of agg through the stream's leader
// ($JS.API.STREAM.MSG.GET), never a direct get, which any replica of the
// stream answers and which may lag: the proof a leader asks for before it
// acts must see what the stream has acknowledged.
func (s *Store) LastFromLeader(ctx context.Context, agg Aggregate) (Event, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
	}
	m, err := s.getFromLeader(ctx, struct {
		LastFor string `json:"last_by_subj"`
	}{s.subjects.Filter(agg)}, "the last event of "+agg.String())
	if err != nil {
		return Event{}, err
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
