package rest

import (
	"context"
	"net/http"
	"net/url"

	"github.com/claimstream/claimstream/projections/cost"
)

// cost answers GET /api/v1/cost: the cost report over a period, from the
// cost index (cost_index.go), which holds the whole log's accruals (a
// machine's state at the period's start comes from before it).
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
	rep, err := s.costs.Report(r.Context(), by, win.Since, win.Until)
	if s.answerCostIndex(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// Cost reads the cost report (query: since, until, month, by).
func (c *Client) Cost(ctx context.Context, query url.Values) (cost.Report, error) {
	var out cost.Report
	err := c.Get(ctx, "/api/v1/cost", query, &out)
	return out, err
}
