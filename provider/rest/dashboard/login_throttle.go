package dashboard

import (
	"fmt"
	"math"
	"net/http"
	"time"
)

// LoginThrottle limits failed logins per client address; rest.AuthLimiter
// is one, shared with the API so both count against one budget.
type LoginThrottle interface {
	// Check runs check (the token's comparison) unless the request's
	// address is over its budget: "" for a good token, "refused" for a
	// wrong one (counted, and logged as refusal while the address's
	// episode is young), "throttled" with the wait for an address over
	// its budget (check not run).
	Check(r *http.Request, surface string, check func() bool, refusal string, attrs ...any) (retryAfter time.Duration, outcome string)
}

// loginSurface is the metric's surface label of a dashboard login.
const loginSurface = "dashboard"

// loginRefusal is the log line of a wrong token.
const loginRefusal = "dashboard login refused: wrong token"

// checkLogin runs check through the throttle, if any.
func (d *dashboard) checkLogin(r *http.Request, check func() bool) (time.Duration, string) {
	if d.opts.Throttle == nil {
		if check() {
			return 0, ""
		}
		d.log.Warn(loginRefusal, "remote", r.RemoteAddr)
		return 0, "refused"
	}
	return d.opts.Throttle.Check(r, loginSurface, check, loginRefusal)
}

// renderThrottled answers the login page again, with 429 and Retry-After,
// to an address over its budget of failed logins.
func (d *dashboard) renderThrottled(w http.ResponseWriter, wait time.Duration, next string) {
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", fmt.Sprint(secs))
	d.render(w, http.StatusTooManyRequests, "login", pageData{Page: "login", Title: "Log in", Next: next,
		Error: fmt.Sprintf("too many failed logins from this address; try again in %d s", secs)})
}
