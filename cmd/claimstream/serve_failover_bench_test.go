package main

import (
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
)

// BenchmarkLeaderFailover: three serve replicas on loopback, fresh each
// iteration; kill -9 of the leader, then the time to the first write a
// survivor acknowledges (a REST decommission). Reported: the median and
// the max over the iterations (docs/benchmarks.md).
//
//	go test ./cmd/claimstream -run '^$' -bench LeaderFailover -benchtime 10x -timeout 30m
func BenchmarkLeaderFailover(b *testing.B) {
	var took []time.Duration
	for b.Loop() {
		took = append(took, failoverOnce(b))
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
	b.ReportMetric(0, "ns/op")
}

func failoverOnce(b *testing.B) time.Duration {
	b.StopTimer()
	defer b.StartTimer()
	replicas := threeReplicas(b)
	defer func() {
		for _, r := range replicas {
			r.signal(syscall.SIGKILL)
		}
	}()
	sameLog(b, replicas)
	leader := leaderOf(b, replicas)
	killedAt := time.Now()
	leader.signal(syscall.SIGKILL)
	survivors := without(replicas, leader)
	b.Cleanup(func() {
		if b.Failed() {
			for _, r := range survivors {
				b.Logf("%s's log:\n%s", r.name, lastLines(r.logText(), 80))
			}
		}
	})
	var took time.Duration
	eventstest.CheckFor(b, 90*time.Second, 20*time.Millisecond, func() error {
		for _, r := range survivors {
			if err := r.toggleSlot("node-3.lan", false); err == nil {
				took = time.Since(killedAt)
				return nil
			}
		}
		return errors.New("no leader yet")
	})
	b.Logf("failover %s", took.Round(time.Millisecond))
	return took
}
