package rest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/claimstream/claimstream/projections"
)

// queryParams lists, by route, the query parameters it reads (as
// schemas/openapi.yaml documents them). A parameter a route does not read
// is refused rather than ignored: `?phase=bogus` or `?phse=ready` answering
// an empty or unfiltered list reads as a true answer.
var queryParams = map[string][]string{
	"GET /api/v1/groups":              {"all"},
	"GET /api/v1/slots":               {"group", "all"},
	"GET /api/v1/claims":              {"group", "slot", "phase"},
	"GET /api/v1/events":              {"slot", "claim", "group", "type", "since", "until", "from", "last", "follow"},
	"GET /api/v1/events/export":       {"slot", "claim", "group", "type", "since", "until", "from", "last", "follow"},
	"GET /api/v1/events/stream":       {"slot", "claim", "group", "type", "from", "last"},
	"GET /api/v1/timeline":            {"since", "until"},
	"GET /api/v1/audit/claims/{name}": {"slot"},
	"GET /api/v1/replay":              {"at", "seq"},
	"GET /api/v1/cost":                {"since", "until", "month", "by", "forecast"},
	"GET /api/v1/sinks/dead-letters":  {"sink"},
	"POST /api/v1/whatif":             {"progress"},
}

// queryValues are the values a parameter may take, where they are few.
var queryValues = map[string][]string{
	"all":      {"true", "false"},
	"follow":   {"true", "false"},
	"progress": {"true", "false"},
	"forecast": {"true", "false"},
	"by":       {"group", "slot", "requester", "claim"},
	"phase": {
		string(projections.PhasePending), string(projections.PhaseBooting), string(projections.PhaseReady),
		string(projections.PhaseFailed), string(projections.PhaseCompleted),
	},
}

// checkQuery answers 400 to a request whose query names a parameter the
// route does not take, repeats one, or gives one a value outside its
// allowed set; the message lists what is allowed.
func checkQuery(pattern string, next http.Handler) http.Handler {
	allowed := queryParams[pattern]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q, err := parseQuery(r)
		if err != nil {
			writeError(w, http.StatusBadRequest, "InvalidArgument", "query: "+err.Error())
			return
		}
		for _, name := range sortedKeys(q) {
			vals := q[name]
			if !slices.Contains(allowed, name) {
				msg := fmt.Sprintf("unknown query parameter %q; %s %s takes none", name, r.Method, r.URL.Path)
				if len(allowed) > 0 {
					msg = fmt.Sprintf("unknown query parameter %q; %s %s takes %s", name, r.Method, r.URL.Path, strings.Join(allowed, ", "))
				}
				writeError(w, http.StatusBadRequest, "InvalidArgument", msg)
				return
			}
			if len(vals) > 1 {
				writeError(w, http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("%s: given %d times; give it once", name, len(vals)))
				return
			}
			if set, ok := queryValues[name]; ok && vals[0] != "" && !slices.Contains(set, vals[0]) {
				writeError(w, http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("%s: %q is not one of %s", name, vals[0], strings.Join(set, ", ")))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// parseQuery is r.URL.Query, but a malformed query (a bad %-escape) is an
// error instead of silently dropped parameters.
func parseQuery(r *http.Request) (url.Values, error) {
	return url.ParseQuery(r.URL.RawQuery)
}
