package handlers_test

import (
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/decide"
)

func TestCollector(t *testing.T) {
	e := newRenv(t)
	e.declare("g", events.GroupSpec{ClaimTTL: events.Duration(10 * time.Minute)}, false, "a")
	e.increase("g", 1)
	c := e.claim("a")
	e.h.MustExec(decide.DecreaseTargetSize{Group: "g", Delta: -1, RequestedBy: "ca"})
	if d := e.passes(); d <= 0 || d > 10*time.Minute+time.Second {
		t.Fatalf("requeue %s", d)
	}
	e.step(10*time.Minute - time.Second)
	e.passes()
	if len(e.slot("a").Claims) != 1 {
		t.Fatal("collected early")
	}
	e.step(time.Second)
	e.passes()
	sl := e.slot("a")
	if len(sl.Claims) != 0 || sl.LastClaim == nil || sl.LastClaim.Claim != c.Name {
		t.Fatalf("claims %v digest %+v", sl.Claims, sl.LastClaim)
	}
}
