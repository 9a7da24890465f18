package rest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// A follower whose views are behind answers an authenticated GET with 503
// and the reason; health checks and unauthenticated requests are not
// asked about freshness.
func TestFollowerReadsBehindTheLogAre503(t *testing.T) {
	f := resttest.Scripted(t)
	behind := &decide.Error{Code: decide.CodeUnavailable, Msg: "views 3 events behind the log (at seq 7 of 10 after 2s); retry shortly"}
	h := rest.New(f.H.Views, f.H.Service, f.H.Store, f.H.Clock, rest.Options{Token: resttest.Token, FreshReads: func(context.Context) error { return behind }})
	get := func(path, token string) (int, rest.ErrorBody) {
		rec := &recorder{header: http.Header{}}
		req, _ := http.NewRequest("GET", path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		h.ServeHTTP(rec, req)
		var body rest.ErrorBody
		_ = json.Unmarshal(rec.body.Bytes(), &body)
		return rec.status, body
	}
	if status, body := get("/api/v1/groups", resttest.Token); status != http.StatusServiceUnavailable || body.Code != "Unavailable" || body.Error != behind.Msg {
		t.Fatalf("stale follower GET: %d %+v", status, body)
	}
	if status, _ := get("/api/v1/groups", ""); status != http.StatusUnauthorized {
		t.Fatalf("unauthenticated GET: %d, want 401 before any freshness answer", status)
	}
	if status, _ := get("/healthz", ""); status != http.StatusOK {
		t.Fatalf("healthz: %d", status)
	}
}
