package natsserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"
)

// HandOffStreamLeaders moves the leadership of each of streams that this
// server leads to another current replica. The claimstream leader calls it
// once elected: its process going away (a kill, a crash) then leaves the
// streams' leaders standing, and the next claimstream leader appends
// without first waiting for JetStream to elect new ones. It returns the
// streams it moved.
//
// It returns once each stream it moved has its new leader (or ctx ends):
// the writes of the new term then find one.
//
// A stream with a replica down stays where it is: losing this server then
// costs the quorum wherever the stream's leader is, and a move makes the
// term's first writes wait for an election on the only other replica.
func (e *Embedded) HandOffStreamLeaders(ctx context.Context, clk clock.WithTicker, streams ...string) ([]string, error) {
	if !e.Clustered() {
		return nil, nil
	}
	self := e.Server.Name()
	var moved []string
	for _, st := range streams {
		if e.StreamLeader(st) != self || !e.replicasUp(st) {
			continue
		}
		// An empty placement asks for any online replica but this one.
		resp, err := e.Conn.RequestWithContext(ctx, jetstream.DefaultAPIPrefix+"STREAM.LEADER.STEPDOWN."+st, []byte(`{"placement":{}}`))
		if err != nil {
			return moved, fmt.Errorf("hand off the leadership of stream %s: %w", st, err)
		}
		if err := apiOutcome(resp.Data); err != nil {
			return moved, fmt.Errorf("hand off the leadership of stream %s: %w", st, err)
		}
		moved = append(moved, st)
		if err := e.waitStreamLedElsewhere(ctx, clk, st); err != nil {
			return moved, err
		}
	}
	return moved, nil
}

// replicaSeenWithin is how recently the stream's leader must have heard
// from a replica for it to count as up: JetStream's raft heartbeats come
// every second, and a server killed with -9 is marked offline much later.
const replicaSeenWithin = 2 * time.Second

// replicasUp reports whether every other replica of stream is online and
// heard from recently, as this server, its leader, sees them. A replica
// a few entries behind counts: it catches up in moments.
func (e *Embedded) replicasUp(stream string) bool {
	acc, err := e.Server.JszAccount(&server.JSzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Streams: true})
	if err != nil || acc == nil {
		return false
	}
	for _, sd := range acc.Streams {
		if sd.Name != stream || sd.Cluster == nil {
			continue
		}
		if len(sd.Cluster.Replicas) == 0 {
			return false
		}
		for _, r := range sd.Cluster.Replicas {
			if r.Offline || r.Active > replicaSeenWithin {
				return false
			}
		}
		return true
	}
	return false
}

// waitStreamLedElsewhere polls until stream has a leader other than this
// server.
func (e *Embedded) waitStreamLedElsewhere(ctx context.Context, clk clock.WithTicker, stream string) error {
	t := clk.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if l := e.StreamLeader(stream); l != "" && l != e.Server.Name() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream %s has no new leader yet: %w", stream, ctx.Err())
		case <-t.C():
		}
	}
}

// apiOutcome is the error of a JetStream API answer that is not a success.
func apiOutcome(data []byte) error {
	var r struct {
		Success bool `json:"success"`
		Error   *struct {
			Description string `json:"description"`
			ErrCode     int    `json:"err_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if r.Error != nil {
		return fmt.Errorf("%s (code %d)", r.Error.Description, r.Error.ErrCode)
	}
	if !r.Success {
		return errors.New("not done")
	}
	return nil
}
