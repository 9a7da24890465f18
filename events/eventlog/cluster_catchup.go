package eventlog

import (
	"context"
	"fmt"
	"time"
)

// A replica that restarts holds an old copy of the log until JetStream has
// caught it up. A reader whose consumer JetStream places on such a copy is
// told, truthfully for that copy, that nothing is left after its end, and
// would take the events still to come for missing ones. So a replica reads
// the whole log (to build its views) only once every reachable copy is
// current.

// WaitReplicasCurrent polls (every 100ms, until ctx ends) until the
// stream has a leader and every replica of it that is not offline is
// current. A stream on one server returns at once. progress, when set, is
// called with what is awaited every 10s: the replicas behind, or why the
// stream's state could not be read (no leader, no answer).
func (s *Store) WaitReplicasCurrent(ctx context.Context, progress func(lagging []string, why error, waited time.Duration)) error {
	start := time.Now()
	lastReport := start
	for {
		lagging, err := s.laggingReplicas(ctx)
		if err == nil && lagging == nil {
			return nil
		}
		if progress != nil && time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			progress(lagging, err, time.Since(start))
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("replicas %v not current", lagging)
			}
			return fmt.Errorf("stream %s: waiting for its replicas to catch up: %w (%v)", s.cfg.Stream, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// laggingReplicas names the stream's reachable replicas that are behind
// (nil: none), or says the stream has no leader.
func (s *Store) laggingReplicas(ctx context.Context) ([]string, error) {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := s.js.Stream(ictx, s.cfg.Stream)
	if err != nil {
		return nil, err
	}
	ci := st.CachedInfo().Cluster
	if ci == nil {
		return nil, nil
	}
	if ci.Leader == "" {
		return nil, fmt.Errorf("no leader")
	}
	var lagging []string
	for _, r := range ci.Replicas {
		if !r.Offline && !r.Current {
			lagging = append(lagging, r.Name)
		}
	}
	return lagging, nil
}
