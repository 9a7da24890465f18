package main

import (
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/provider/rest"
)

// authLimiter throttles failed authentications per client address, one
// budget for the API and the dashboard's login (docs/operations.md,
// "Failed authentications"), counted on the metrics. Its budgets are wall
// time, whatever clock the plane runs on.
func (p *plane) authLimiter() *rest.AuthLimiter {
	o := rest.AuthLimitOptions{Clock: clock.RealClock{}, Logger: p.log}
	if p.tel != nil {
		o.OnFailure = p.tel.Metrics.AuthFailure
	}
	return rest.NewAuthLimiter(o)
}
