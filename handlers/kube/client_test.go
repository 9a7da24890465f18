package kube

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Every API group's client waits on one token bucket, of the defaults when
// the config names no QPS: a Job create and a Node patch draw from one
// budget, and a burst of a hundred machines is not throttled at 5 a second.
func TestNewClientSharesOneDefaultRateLimiter(t *testing.T) {
	c, err := NewClient(&rest.Config{Host: "https://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	cs := c.(*clientset)
	limiters := []flowcontrol.RateLimiter{
		cs.core.RESTClient().GetRateLimiter(), cs.batch.RESTClient().GetRateLimiter(),
		cs.apps.RESTClient().GetRateLimiter(), cs.coordination.RESTClient().GetRateLimiter(),
		cs.policy.RESTClient().GetRateLimiter(), cs.events.RESTClient().GetRateLimiter(),
	}
	for i, l := range limiters {
		if l != limiters[0] {
			t.Errorf("group %d has a rate limiter of its own", i)
		}
	}
	if got := limiters[0].QPS(); got != DefaultQPS {
		t.Errorf("QPS %v, want %d", got, DefaultQPS)
	}
	// The burst is what a token bucket lets through at once.
	n := 0
	for limiters[0].TryAccept() {
		n++
		if n > 10*DefaultBurst {
			break
		}
	}
	if n < DefaultBurst || n > DefaultBurst+1 {
		t.Errorf("%d requests at once, want a burst of %d", n, DefaultBurst)
	}
}

func TestNewClientRefusesANegativeRateLimit(t *testing.T) {
	for _, cfg := range []rest.Config{{Host: "https://127.0.0.1:1", QPS: -1}, {Host: "https://127.0.0.1:1", QPS: 10, Burst: -1}} {
		if _, err := NewClient(&cfg); err == nil {
			t.Errorf("QPS %v burst %d: no error", cfg.QPS, cfg.Burst)
		}
	}
	c, err := NewClient(&rest.Config{Host: "https://127.0.0.1:1", QPS: 7, Burst: 9})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.(*clientset).batch.RESTClient().GetRateLimiter().QPS(); got != 7 {
		t.Errorf("QPS %v, want 7", got)
	}
}
