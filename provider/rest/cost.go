package rest

import (
	"context"
	"net/http"
	"net/url"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections/cost"
)

// cost answers GET /api/v1/cost: the cost report over a period, folded from
// the whole log (a machine's state at the period's start comes from before
// it).
func (s *server) cost(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	win, err := cost.ParseWindow(q.Get("since"), q.Get("until"), q.Get("month"), s.now())
	if err != nil {
		writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
		return
	}
	by := cost.ByGroup
	if v := q.Get("by"); v != "" {
		if by, err = cost.ParseDimension(v); err != nil {
			writeError(w, http.StatusBadRequest, "InvalidArgument", err.Error())
			return
		}
	}
	f := cost.NewFold(by, win.Since, win.Until)
	err = s.store.Read(r.Context(), 1, 0, func(e events.Event) error {
		f.Apply(e)
		return nil
	})
	if gaps := events.GapsOf(err); gaps != nil {
		writeError(w, http.StatusPreconditionFailed, "FailedPrecondition", "cannot report over a damaged log (sequences missing): "+err.Error())
		return
	}
	if err != nil {
		if r.Context().Err() == nil {
			s.fail(w, err)
		}
		return
	}
	writeJSON(w, http.StatusOK, f.Report(win.Until))
}

// Cost reads the cost report (query: since, until, month, by).
func (c *Client) Cost(ctx context.Context, query url.Values) (cost.Report, error) {
	var out cost.Report
	err := c.Get(ctx, "/api/v1/cost", query, &out)
	return out, err
}
