package serve

import (
	"net/http"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/timeline"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/dashboard"
)

// withDashboard builds the REST API with the web dashboard in front of it
// (/ui/, docs/dashboard.md): same address, same token. The dashboard's
// sessions are accepted by the API; its timeline index is kept current by
// serve ("timeline index").
func (p *plane) withDashboard(ro rest.Options, token string, copiesEvery uint64) (http.Handler, error) {
	// Sessions last wall-clock time, whatever clock the plane runs on.
	sessions := dashboard.NewSessions(clock.RealClock{}, 0)
	ro.Session = sessions.Access
	p.timelines = timeline.NewIndex(p.store, p.views.Checkpoints(), p.log)
	p.timelines.KeepCopies(p.views.Checkpoints(), projections.CopyOptions{Every: copiesEvery, Writer: p.leads, OnSave: p.countCopySaves("timeline")}) // saved copies beside the checkpoints
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

// countCopySaves counts the saves of an index's copies
// (claimstream_index_copy_saves_total); nil without telemetry.
func (p *plane) countCopySaves(index string) func(outcome string) {
	if p.tel == nil {
		return nil
	}
	return func(outcome string) { p.tel.Metrics.IndexCopySave(index, outcome) }
}
