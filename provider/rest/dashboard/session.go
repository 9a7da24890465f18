package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/provider/rest"
)

// CookieName is the dashboard's session cookie. It holds a random session
// id, never the API token.
const CookieName = "claimstream_session"

// CSRFHeader carries a session's CSRF token on every write the dashboard
// makes through the API; CSRFField carries it in the logout form.
const (
	CSRFHeader = "X-CSRF-Token"
	CSRFField  = "csrf"
)

// DefaultSessionTTL is how long a login lasts (it does not slide: an
// operator logs in again after it).
const DefaultSessionTTL = 12 * time.Hour

// MaxSessions bounds the sessions kept in memory; logging in past it ends
// the oldest.
const MaxSessions = 1000

// Sessions are the dashboard's logins, kept in memory (a restart of serve
// logs everyone out). A session is found by the SHA-256 of its id, so the
// table holds no usable cookie.
type Sessions struct {
	clk clock.PassiveClock
	ttl time.Duration

	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
}

type session struct {
	// readOnly: the session logged in with the read-only token.
	readOnly bool
	csrf     string
	created  time.Time
	expires  time.Time
}

// NewSessions keeps sessions that last ttl (DefaultSessionTTL when 0) on clk.
func NewSessions(clk clock.PassiveClock, ttl time.Duration) *Sessions {
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &Sessions{clk: clk, ttl: ttl, byID: map[[sha256.Size]byte]*session{}}
}

// randomToken is 32 random bytes, URL-safe base64.
func randomToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// start opens a session: its id (for the cookie), its CSRF token and when
// it expires.
func (s *Sessions) start(readOnly bool) (id string, sess session, err error) {
	id, err = randomToken()
	if err != nil {
		return "", session{}, err
	}
	csrf, err := randomToken()
	if err != nil {
		return "", session{}, err
	}
	now := s.clk.Now()
	sess = session{readOnly: readOnly, csrf: csrf, created: now, expires: now.Add(s.ttl)}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now)
	for len(s.byID) >= MaxSessions {
		s.evictOldest()
	}
	cp := sess
	s.byID[sha256.Sum256([]byte(id))] = &cp
	return id, sess, nil
}

// sweep drops expired sessions; the caller holds mu.
func (s *Sessions) sweep(now time.Time) {
	for k, v := range s.byID {
		if !now.Before(v.expires) {
			delete(s.byID, k)
		}
	}
}

func (s *Sessions) evictOldest() {
	var oldest [sha256.Size]byte
	var at time.Time
	first := true
	for k, v := range s.byID {
		if first || v.created.Before(at) {
			oldest, at, first = k, v.created, false
		}
	}
	delete(s.byID, oldest)
}

// lookup is the live session of r's cookie.
func (s *Sessions) lookup(r *http.Request) (session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return session{}, false
	}
	key := sha256.Sum256([]byte(c.Value))
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.byID[key]
	if !ok {
		return session{}, false
	}
	if !s.clk.Now().Before(sess.expires) {
		delete(s.byID, key)
		return session{}, false
	}
	return *sess, true
}

// end closes r's session, if any.
func (s *Sessions) end(r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil {
		s.mu.Lock()
		delete(s.byID, sha256.Sum256([]byte(c.Value)))
		s.mu.Unlock()
	}
}

// Len counts the live sessions.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(s.clk.Now())
	return len(s.byID)
}

// Authenticates reports whether r is made in a live session: its cookie
// names one and, unless r only reads, it carries that session's CSRF token
// in the X-CSRF-Token header (a cross-site form or script cannot read it).
// It is the REST API's rest.Options.Session.
func (s *Sessions) Authenticates(r *http.Request) bool {
	sess, ok := s.lookup(r)
	if !ok {
		return false
	}
	return safeMethod(r.Method) || sameToken(r.Header.Get(CSRFHeader), sess.csrf)
}

// Access is what r may do in its session (rest.Options.Session): nothing
// unless Authenticates, else read, or everything for a session of the
// admin token.
func (s *Sessions) Access(r *http.Request) rest.Access {
	sess, ok := s.lookup(r)
	switch {
	case !ok || !(safeMethod(r.Method) || sameToken(r.Header.Get(CSRFHeader), sess.csrf)):
		return rest.AccessNone
	case sess.readOnly:
		return rest.AccessRead
	}
	return rest.AccessAdmin
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// sameToken compares in constant time (digests, so the length does not
// show either).
func sameToken(got, want string) bool {
	if got == "" || want == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// cookie is the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no cross-site request carries it), Secure over TLS,
// scoped to the whole origin (the pages and the API), expiring with the
// session.
func cookie(r *http.Request, value string, expires time.Time, now time.Time) *http.Cookie {
	c := &http.Cookie{
		Name: CookieName, Value: value, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
	if value == "" {
		c.MaxAge = -1
		c.Expires = time.Unix(1, 0)
	} else {
		c.MaxAge = int(expires.Sub(now).Seconds())
		c.Expires = expires
	}
	return c
}
