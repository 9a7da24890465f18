package serve

import (
	"net/http"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/dashboard"
)

// withDashboard builds the REST API with the web dashboard in front of it
// (/ui/, docs/dashboard.md): same address, same token. The dashboard's
// sessions are accepted by the API; its timeline index is a projection of
// the views (registerProjections).
func (p *plane) withDashboard(ro rest.Options, token string) (http.Handler, error) {
	// Sessions last wall-clock time, whatever clock the plane runs on.
	sessions := dashboard.NewSessions(clock.RealClock{}, 0)
	ro.Session = sessions.Access
	ro.Timeline = p.timelines
	ro.Cost = p.costs
	do := dashboard.Options{Token: token, ReadToken: ro.ReadToken, Sessions: sessions, Logger: p.log, Throttle: ro.AuthLimit, Known: rest.Known(p.views)}
	if p.tel != nil {
		do.OnLogin, do.OnCSRFRefused = p.tel.Metrics.DashboardLogin, p.tel.Metrics.DashboardCSRFRefused
	}
	h, err := dashboard.New(rest.New(p.views, p.service, p.store, p.clock, ro), do)
	if err != nil {
		return nil, err
	}
	// A page view in a live session counts its connection as
	// authenticated, as an API call with the token does.
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sessions.Authenticates(r) {
			rest.Authenticated(r)
		}
		h.ServeHTTP(w, r)
	}), nil
}
