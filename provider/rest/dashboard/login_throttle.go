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
	// Throttled reports whether the request's address is over its budget
	// and how long until it may try again.
	Throttled(r *http.Request, surface string) (retryAfter time.Duration, throttled bool)
	// Refused counts a failed login against the address, logging msg
	// while the address's episode is young.
	Refused(r *http.Request, surface, msg string, attrs ...any)
}

// loginSurface is the metric's surface label of a dashboard login.
const loginSurface = "dashboard"

// throttled answers the login page again, with 429 and Retry-After, to an
// address over its budget of failed logins, before the token is checked.
func (d *dashboard) throttled(w http.ResponseWriter, r *http.Request, next string) bool {
	if d.opts.Throttle == nil {
		return false
	}
	wait, over := d.opts.Throttle.Throttled(r, loginSurface)
	if !over {
		return false
	}
	secs := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", fmt.Sprint(secs))
	d.render(w, http.StatusTooManyRequests, "login", pageData{Page: "login", Title: "Log in", Next: next,
		Error: fmt.Sprintf("too many failed logins from this address; try again in %d s", secs)})
	return true
}

// refused logs a wrong-token login: through the throttle, which counts it
// and keeps a guesser from flooding the log, else on its own.
func (d *dashboard) refused(r *http.Request) {
	const msg = "dashboard login refused: wrong token"
	if d.opts.Throttle == nil {
		d.log.Warn(msg, "remote", r.RemoteAddr)
		return
	}
	d.opts.Throttle.Refused(r, loginSurface, msg)
}
