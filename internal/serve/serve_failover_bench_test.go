package serve

import (
	"errors"
	"slices"
	"strings"
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
//	go test ./internal/serve -run '^$' -bench LeaderFailover -benchtime 10x -timeout 30m
func BenchmarkLeaderFailover(b *testing.B) { benchFailovers(b, syscall.SIGKILL) }

// BenchmarkLeaderHandOver: BenchmarkLeaderFailover with SIGTERM, as a
// rolling update stops the leader: it releases the lease as it stops.
//
//	go test ./internal/serve -run '^$' -bench LeaderHandOver -benchtime 20x -timeout 30m
func BenchmarkLeaderHandOver(b *testing.B) { benchFailovers(b, syscall.SIGTERM) }

// notableLines are the last n lines of a serve log at INFO and above.
func notableLines(log string, n int) string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=INFO") || strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// benchFailovers runs failoverOnce with sig each iteration and reports
// the median and the max.
func benchFailovers(b *testing.B, sig syscall.Signal) {
	var took []time.Duration
	for b.Loop() {
		took = append(took, failoverOnce(b, sig))
	}
	slices.Sort(took)
	b.ReportMetric(took[len(took)/2].Seconds(), "median-s")
	b.ReportMetric(took[len(took)-1].Seconds(), "max-s")
	b.ReportMetric(0, "ns/op")
}

// failoverOnce starts three replicas, sends the leader sig, and times it
// to the first write a survivor acknowledges.
func failoverOnce(b *testing.B, sig syscall.Signal) time.Duration {
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
	// Not waiting for the exit: a stopping leader hands over as it stops.
	_ = syscall.Kill(-leader.cmd.Process.Pid, sig)
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
	b.Logf("%v of the leader to a write on a survivor: %s", sig, took.Round(time.Millisecond))
	if slow := sig == syscall.SIGTERM && took > 2*time.Second || took > 6*time.Second; slow {
		leader.signal(syscall.SIGTERM) // its stop, logged to the end
		b.Logf("a slow failover; the leader's log:\n%s", notableLines(leader.logText(), 25))
		for _, r := range survivors {
			b.Logf("%s's log:\n%s", r.name, notableLines(r.logText(), 25))
		}
	}
	leader.signal(syscall.SIGKILL)
	return took
}
