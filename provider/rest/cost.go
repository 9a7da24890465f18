package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/claimstream/claimstream/projections/cost"
)

// cost answers GET /api/v1/cost: the cost report over a period, from the
// cost index (cost.Runner), which holds the whole log's accruals (a
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
	forecast := q.Get("forecast") == "true"
	// Hours that have not happened are not charged: a period that ends
	// after now (a month in progress) is cut at now, and says so. What the
	// rest of it may cost is a forecast, given only when asked for, apart.
	now := s.now()
	asked := win.Until
	if !win.Since.Before(now) {
		writeError(w, http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("the period starts at %s, not before now (%s): nothing in it has happened yet", win.Since.Format(time.RFC3339), now.Format(time.RFC3339)))
		return
	}
	if forecast && !win.Until.After(now) {
		writeError(w, http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("forecast: the period ended at %s, before now (%s): its report is what happened, there is nothing to forecast; drop forecast=true", win.Until.Format(time.RFC3339), now.Format(time.RFC3339)))
		return
	}
	if win.Until.After(now) {
		win.Until = now
	}
	costs, err := s.costIndex(r.Context())
	if s.answerCostIndex(w, r, err) {
		return
	}
	rep, err := costs.Report(r.Context(), by, win.Since, win.Until)
	if s.answerCostIndex(w, r, err) {
		return
	}
	if asked.After(win.Until) {
		rep.AskedUntil = &asked
	}
	if forecast {
		whole, err := costs.Report(r.Context(), by, win.Since, asked)
		if s.answerCostIndex(w, r, err) {
			return
		}
		rep.Forecast = cost.ForecastOf(whole)
	}
	writeJSON(w, http.StatusOK, rep)
}

// Cost reads the cost report (query: since, until, month, by, forecast).
func (c *Client) Cost(ctx context.Context, query url.Values) (cost.Report, error) {
	var out cost.Report
	err := c.Get(ctx, "/api/v1/cost", query, &out)
	return out, err
}

// answerCostIndex writes the answer for an error of the cost index and
// reports whether it did.
func (s *server) answerCostIndex(w http.ResponseWriter, r *http.Request, err error) bool {
	var building *cost.BuildingError
	var damaged *cost.DamagedLogError
	var expired *cost.ExpiredLogError
	switch {
	case err == nil:
		return false
	case errors.As(err, &building):
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "Unavailable", building.Error())
	case errors.As(err, &damaged):
		writeError(w, http.StatusPreconditionFailed, "FailedPrecondition", damaged.Error())
	case errors.As(err, &expired):
		writeError(w, http.StatusGone, "Expired", expired.Error())
	case r.Context().Err() != nil:
	default:
		s.readFailed(w, r, "cost", err)
	}
	return true
}
