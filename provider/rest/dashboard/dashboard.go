// Package dashboard serves claimstream's web dashboard next to the REST
// API, on the API's address: a login page that trades the API's bearer
// token for a session cookie, and pages that draw the API's views, audit
// stories, timeline and live event stream (docs/dashboard.md).
//
// Every asset is embedded: plain HTML, CSS and JavaScript, no third-party
// code, no request leaves the origin. The pages hold no data; their
// scripts read it from the API with the session cookie, which the API
// accepts through rest.Options.Session (Sessions.Authenticates).
package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
)

//go:embed assets templates
var content embed.FS

// Options configure the dashboard.
type Options struct {
	// Token is the API's admin bearer token: the login page takes it.
	Token string
	// ReadToken, when set, is the API's read-only token: the login page
	// takes it too, for a session that reads only (the slot page shows
	// no commands; the API refuses its writes).
	ReadToken string
	// Sessions are the logins; the same value goes to rest.Options.Session.
	Sessions *Sessions
	// Clock times the sessions (the real clock: a session's lifetime is
	// wall time, not a simulator's).
	Clock  clock.PassiveClock
	Logger *slog.Logger
	// OnLogin, when set, is told of every login by its result: "ok",
	// "wrong_token" or "cross_site" (the metrics).
	OnLogin func(result string)
	// OnCSRFRefused, when set, is told of every write refused for its
	// CSRF token.
	OnCSRFRefused func()
	// Throttle, when set, limits failed logins per client address
	// (login_throttle.go; serve passes the API's rest.AuthLimiter).
	Throttle LoginThrottle
	// Known, when set, says whether the views know a slot or a claim
	// (kind "slot" or "claim"; serve passes rest.Known): a page for one
	// they do not know answers 404 and offers no commands.
	Known func(kind, name string) bool
}

// ContentSecurityPolicy is sent with every page: only this origin's own
// scripts, styles and images; no inline script, no eval; no framing.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

type dashboard struct {
	opts  Options
	log   *slog.Logger
	pages map[string]*template.Template
	token [sha256.Size]byte
	read  [sha256.Size]byte
}

// pageNames are the pages that need a session, each with its script.
var pageNames = []string{"pool", "timeline", "slot", "claim", "events"}

// New serves the dashboard under /ui/ and hands every other request to
// api. A request that carries a session cookie to the API and writes must
// carry the session's CSRF token too, else it is refused with 403.
func New(api http.Handler, o Options) (http.Handler, error) {
	if o.Sessions == nil {
		return nil, fmt.Errorf("dashboard: no sessions")
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnLogin == nil {
		o.OnLogin = func(string) {}
	}
	if o.OnCSRFRefused == nil {
		o.OnCSRFRefused = func() {}
	}
	d := &dashboard{opts: o, log: o.Logger, pages: map[string]*template.Template{}, token: sha256.Sum256([]byte(o.Token)), read: sha256.Sum256([]byte(o.ReadToken))}
	for _, name := range append([]string{"login", "missing"}, pageNames...) {
		t, err := template.ParseFS(content, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: template %s: %w", name, err)
		}
		d.pages[name] = t
	}
	static, err := fs.Sub(content, "assets")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", secure(staticFiles(static)))
	mux.Handle("GET /ui/login", secure(http.HandlerFunc(d.loginPage)))
	mux.Handle("POST /ui/login", secure(http.HandlerFunc(d.login)))
	mux.Handle("POST /ui/logout", secure(http.HandlerFunc(d.logout)))
	mux.Handle("GET /ui/{$}", d.page("pool"))
	mux.Handle("GET /ui/timeline", d.page("timeline"))
	mux.Handle("GET /ui/events", d.page("events"))
	mux.Handle("GET /ui/slots/{name}", d.page("slot"))
	mux.Handle("GET /ui/claims/{name}", d.page("claim"))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusSeeOther))
	mux.Handle("/ui/", secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page: "+r.URL.Path, http.StatusNotFound)
	})))
	mux.Handle("/", d.csrf(api))
	return mux, nil
}

// staticFiles serves the embedded assets, but no directory listing.
func staticFiles(files fs.FS) http.Handler {
	fileServer := http.StripPrefix("/ui/static/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		fileServer.ServeHTTP(w, r)
	})
}

// secure sets the headers every dashboard answer carries.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		if r.TLS != nil {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if strings.HasPrefix(r.URL.Path, "/ui/static/") {
			// Embedded files have no modification time to revalidate
			// with: fetched again each time, so an upgrade never runs
			// a stale script.
			h.Set("Cache-Control", "no-cache")
		} else {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// csrf refuses an API write that comes with a session cookie but without
// the session's CSRF token, saying why (the API alone would answer 401).
// A request with a bearer token is not a browser's ambient credential and
// passes as it is.
func (d *dashboard) csrf(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !safeMethod(r.Method) && r.Header.Get("Authorization") == "" {
			if sess, ok := d.opts.Sessions.lookup(r); ok && !sameToken(r.Header.Get(CSRFHeader), sess.csrf) {
				d.log.Warn("dashboard write refused: no CSRF token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
				d.opts.OnCSRFRefused()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusForbidden)
				_, _ = fmt.Fprintf(w, `{"error":"the request carries the dashboard's session cookie but not its %s header; reload the page","code":"PermissionDenied"}`+"\n", CSRFHeader)
				return
			}
		}
		api.ServeHTTP(w, r)
	})
}

// pageData is what a page's template gets.
type pageData struct {
	Page, Title, Name, CSRF, Error, Next string
	Types                                []events.Type
	// ReadOnly: the session's token is the read-only one.
	ReadOnly bool
	// Kind is the kind of object a "missing" page did not find.
	Kind string
}

func (d *dashboard) render(w http.ResponseWriter, status int, name string, data pageData) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := d.pages[name].ExecuteTemplate(w, "layout", data); err != nil {
		d.log.Error("dashboard page failed", "page", name, "err", err)
	}
}

// kinds are the pages that show one named object, by the object's kind.
var kinds = map[string]string{"slot": "slot", "claim": "claim"}

// page serves a page to a session; without one it sends the browser to
// the login page, which brings it back.
func (d *dashboard) page(name string) http.Handler {
	titles := map[string]string{"pool": "Pool", "timeline": "Timeline", "events": "Events", "slot": "Slot", "claim": "Claim"}
	return secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, ok := d.opts.Sessions.lookup(r)
		if !ok {
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		data := pageData{Page: name, Title: titles[name], Name: r.PathValue("name"), CSRF: sess.csrf, ReadOnly: sess.readOnly}
		if name == "events" {
			data.Types = events.Types()
		}
		if data.Name != "" {
			data.Title += " " + data.Name
			if kind := kinds[name]; kind != "" && d.opts.Known != nil && !d.opts.Known(kind, data.Name) {
				data.Page, data.Kind = "missing", kind
				d.render(w, http.StatusNotFound, "missing", data)
				return
			}
		}
		d.render(w, http.StatusOK, name, data)
	}))
}

// safeNext is where a login sends the browser: a dashboard path of this
// origin, never another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

func (d *dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if _, ok := d.opts.Sessions.lookup(r); ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	d.render(w, http.StatusOK, "login", pageData{Page: "login", Title: "Log in", Next: safeNext(r.URL.Query().Get("next"))})
}

// crossSite reports a request a page of another site made (a login or a
// logout it forged): the browser says so in Sec-Fetch-Site, or in Origin.
func crossSite(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return true
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		return err != nil || u.Host != r.Host
	}
	return false
}

// login trades the API token, posted in the form's body, for a session.
func (d *dashboard) login(w http.ResponseWriter, r *http.Request) {
	if crossSite(r) {
		d.log.Warn("dashboard login refused: cross-site", "remote", r.RemoteAddr, "origin", r.Header.Get("Origin"))
		d.opts.OnLogin("cross_site")
		http.Error(w, "a login from another site is refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		d.render(w, http.StatusBadRequest, "login", pageData{Page: "login", Title: "Log in", Error: "The form could not be read: " + err.Error()})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	var readOnly bool
	wait, outcome := d.checkLogin(r, func() bool {
		got := sha256.Sum256([]byte(strings.TrimSpace(r.PostForm.Get("token"))))
		isAdmin := d.opts.Token != "" && subtle.ConstantTimeCompare(got[:], d.token[:]) == 1
		isRead := d.opts.ReadToken != "" && subtle.ConstantTimeCompare(got[:], d.read[:]) == 1
		readOnly = !isAdmin && isRead
		return isAdmin || isRead
	})
	if outcome == "throttled" {
		d.renderThrottled(w, wait, next)
		return
	}
	if outcome != "" {
		d.opts.OnLogin("wrong_token")
		msg := "That is not the API token. It is in the api-token file of serve's data dir (or --api-token)."
		if d.opts.Token == "" && d.opts.ReadToken == "" {
			msg = "The server has no API token configured; nobody can log in."
		}
		d.render(w, http.StatusUnauthorized, "login", pageData{Page: "login", Title: "Log in", Error: msg, Next: next})
		return
	}
	id, sess, err := d.opts.Sessions.start(readOnly)
	if err != nil {
		d.log.Error("dashboard login failed", "err", err)
		http.Error(w, "cannot start a session: "+err.Error(), http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, cookie(r, id, sess.expires, d.opts.Clock.Now()))
	d.log.Info("dashboard login", "remote", r.RemoteAddr, "read_only", readOnly, "expires", sess.expires.UTC().Format(time.RFC3339))
	d.opts.OnLogin("ok")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session (the form carries its CSRF token) and clears the
// cookie.
func (d *dashboard) logout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	_ = r.ParseForm()
	sess, ok := d.opts.Sessions.lookup(r)
	if ok && !sameToken(r.PostForm.Get(CSRFField), sess.csrf) {
		d.log.Warn("dashboard logout refused: no CSRF token", "remote", r.RemoteAddr)
		d.opts.OnCSRFRefused()
		http.Error(w, "the logout form lacks its CSRF token; reload the page", http.StatusForbidden)
		return
	}
	if ok {
		d.opts.Sessions.end(r)
		d.log.Info("dashboard logout", "remote", r.RemoteAddr)
	}
	http.SetCookie(w, cookie(r, "", time.Time{}, d.opts.Clock.Now()))
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
