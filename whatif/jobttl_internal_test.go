package whatif

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
)

// A run keeps a finished Job without a TTL of its own for at least an
// hour, and for twice the longest window a group's reactors may still
// read it in when that is longer.
func TestFinishedJobTTLOutlastsEveryGroupsWindow(t *testing.T) {
	d := func(x time.Duration) events.Duration { return events.Duration(x) }
	defaults := &pool.Config{Groups: []pool.Group{{Name: "g"}}}
	if got := finishedJobTTL(defaults); got != time.Hour {
		t.Fatalf("defaults: %v, want 1h", got)
	}
	long := &pool.Config{Groups: []pool.Group{{Name: "g"}, {Name: "slow", Spec: events.GroupSpec{
		Lifecycle:            events.Lifecycle{StartupJobTimeout: d(20 * time.Minute), RegistrationWait: d(10 * time.Minute), ReadinessGate: d(10 * time.Minute)},
		MaxNodeProvisionTime: d(30 * time.Minute), DrainTimeout: d(20 * time.Minute),
	}}}}
	if got, want := finishedJobTTL(long), 2*(20+10+10+30+20)*time.Minute; got != want {
		t.Fatalf("slow group: %v, want %v", got, want)
	}
}
