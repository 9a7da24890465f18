// Package rest serves the views and the operator commands of claimstream as
// JSON over HTTP (the API the CLI talks to): the groups, slots and claims,
// the raw event log (filtered, followed, exported as CloudEvents), the audit
// of a slot or a claim, the views replayed to any past time or sequence, and
// the manual commands. schemas/openapi.yaml describes it.
//
// Every /api route needs "Authorization: Bearer <token>"; /healthz,
// /readyz and the event schemas (/schemas/events/) do not. The admin token (Options.Token) may do everything; the
// read-only token (Options.ReadToken) only reads: every route that changes
// the pool, and the backup, answer it 403.
package rest

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/internal/chunkfile"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
	"github.com/claimstream/claimstream/projections/timeline"
	"github.com/claimstream/claimstream/provider/audit"
)

// Options configure the API.
type Options struct {
	// Token is the admin bearer token: every /api request must carry it
	// or ReadToken. With neither every /api request is refused, unless
	// NoAuth is set.
	Token string
	// ReadToken, when set, is the read-only bearer token: the routes that
	// only read answer it, the others (AdminRoutes) refuse it with 403.
	ReadToken string
	// NoAuth serves /api without authentication (loopback tests only).
	NoAuth bool
	// Logger receives one line per failed request.
	Logger *slog.Logger
	// Source is the CloudEvents source of the commands' events
	// (informational; the service stamps its own).
	Source string
	// LogHealth, when set, makes /readyz answer 503 while the event log
	// cannot be written.
	LogHealth *eventlog.LogHealth
	// OnBackup, when set, is told of every backup served (backup.go).
	OnBackup func(at time.Time, size int64, err error)
	// Session, when set, accepts an /api request the bearer token does
	// not: a dashboard session (its cookie, and its CSRF token on a
	// write), with the access of the token it logged in with.
	Session func(*http.Request) Access
	// Timeline, when set, is the index GET /api/v1/timeline cuts windows
	// from (a projection of the views serve registers before their
	// start); else one is built at the first request.
	Timeline *timeline.Index
	// DeadLetters, when set, serves the sinks' dead letters
	// (deadletters.go); nil: serve runs with no sinks.
	DeadLetters DeadLetters
	// Sinks names the sinks of the sinks file: a dead-letter filter that
	// names another is 404 (nil: not checked).
	Sinks []string
	// FreshReads, when set, is asked before every authenticated GET
	// (freshreads.go): a follower's views must first reach the log's end.
	FreshReads func(context.Context) error
	// Cost, when set, is the index GET /api/v1/cost reports from (a
	// projection of the views serve registers before their start); else
	// one is built at the first request.
	Cost *cost.Runner
	// AuthLimit, when set, throttles failed authentications per client
	// address (authlimit.go); serve shares one with the dashboard.
	AuthLimit *AuthLimiter
	// PoolFile, when set, is the state of serve's pool file: /readyz names
	// a file that was not applied, and stays ready.
	PoolFile *pool.FileReport
	// MaxWhatIfs caps the what-ifs running at once, whoever asks
	// (DefaultMaxWhatIfs when 0 or less); one more is answered 429.
	MaxWhatIfs int
}

// server holds what the handlers need.
type server struct {
	views *projections.Runner
	cmds  *handlers.Service
	store *eventlog.Store
	clk   clock.PassiveClock
	opts  Options
	log   *slog.Logger

	// timelines and costs are the indexes of Options, or those built at
	// the first request (indexes.go).
	indexMu   sync.Mutex
	timelines *timeline.Index
	costs     *cost.Runner
	// whatIfs holds a place for each what-if running (whatif.go).
	whatIfs chan struct{}
}

// Access is what a request may do: nothing, read, or everything.
type Access int

const (
	AccessNone Access = iota
	// AccessRead: the read-only token (or a session of it).
	AccessRead
	// AccessAdmin: the admin token (or a session of it).
	AccessAdmin
)

// route is one entry of the mux; Routes lists them for the OpenAPI check.
// admin routes change the pool (or, the backup, copy the whole store out
// for a restore): the read-only token may not call them.
type route struct {
	method, path string
	auth         bool
	h            func(*server, http.ResponseWriter, *http.Request)
	admin        bool
}

var routes = []route{
	{"GET", "/healthz", false, (*server).healthz, false},
	{"GET", "/readyz", false, (*server).readyz, false},
	{"GET", "/schemas/events/{file}", false, (*server).schema, false},
	{"GET", "/api/v1/groups", true, (*server).listGroups, false},
	{"GET", "/api/v1/groups/{name}", true, (*server).getGroup, false},
	{"GET", "/api/v1/slots", true, (*server).listSlots, false},
	{"GET", "/api/v1/slots/{name}", true, (*server).getSlot, false},
	{"POST", "/api/v1/slots/{name}/claim", true, (*server).claimSlot, true},
	{"POST", "/api/v1/slots/{name}/decommission", true, (*server).decommission, true},
	{"POST", "/api/v1/slots/{name}/recommission", true, (*server).recommission, true},
	{"GET", "/api/v1/claims", true, (*server).listClaims, false},
	{"GET", "/api/v1/claims/{name}", true, (*server).getClaim, false},
	{"DELETE", "/api/v1/claims/{name}", true, (*server).deleteClaim, true},
	{"GET", "/api/v1/events", true, (*server).listEvents, false},
	{"GET", "/api/v1/events/export", true, (*server).exportEvents, false},
	{"GET", "/api/v1/events/stream", true, (*server).sseEvents, false},
	{"GET", "/api/v1/timeline", true, (*server).timeline, false},
	{"GET", "/api/v1/audit/slots/{name}", true, (*server).auditSlot, false},
	{"GET", "/api/v1/audit/claims/{name}", true, (*server).auditClaim, false},
	{"GET", "/api/v1/replay", true, (*server).replay, false},
	{"GET", "/api/v1/backup", true, (*server).backup, true},
	{"GET", "/api/v1/cost", true, (*server).cost, false},
	{"GET", "/api/v1/sinks/dead-letters", true, (*server).listDeadLetters, false},
	{"POST", "/api/v1/sinks/dead-letters/redeliver", true, (*server).redeliverDeadLetters, true},
	{"POST", "/api/v1/whatif", true, (*server).whatIf, false},
}

// AdminRoutes lists "METHOD /path" of every route the read-only token may
// not call.
func AdminRoutes() []string {
	var out []string
	for _, r := range routes {
		if r.admin {
			out = append(out, r.method+" "+r.path)
		}
	}
	return out
}

// Routes lists "METHOD /path" of every route the API serves.
func Routes() []string {
	out := make([]string, len(routes))
	for i, r := range routes {
		out[i] = r.method + " " + r.path
	}
	return out
}

// New returns the API handler over the views, the command service and the
// store. clk is the time the derived fields (overdue, free slots, next
// attempt) are judged at.
func New(views *projections.Runner, cmds *handlers.Service, store *eventlog.Store, clk clock.PassiveClock, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxWhatIfs <= 0 {
		opts.MaxWhatIfs = DefaultMaxWhatIfs
	}
	s := &server{views: views, cmds: cmds, store: store, clk: clk, opts: opts, log: opts.Logger, timelines: opts.Timeline,
		whatIfs: make(chan struct{}, opts.MaxWhatIfs)}
	s.costs = opts.Cost
	mux := http.NewServeMux()
	for _, r := range routes {
		h := r.h
		var hf http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h(s, w, req) })
		hf = checkQuery(r.method+" "+r.path, hf)
		if r.admin {
			hf = adminOnly(r.method+" "+r.path, hf)
		}
		if r.auth && r.method == http.MethodGet {
			hf = s.freshReads(hf)
		}
		if r.auth {
			hf = s.authenticate(hf)
		}
		mux.Handle(r.method+" "+r.path, hf)
	}
	methodNotAllowed(mux, func(auth bool, h http.Handler) http.Handler {
		if auth {
			return s.authenticate(h)
		}
		return h
	})
	// Anything else under /api answers JSON, and only to the authenticated.
	mux.Handle("/api/", s.authenticate(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no route %s %s (see schemas/openapi.yaml)", req.Method, req.URL.Path))
	})))
	return s.stampNow(mux)
}

// NowHeader carries the server's clock on every answer, so a client
// computes ages against the clock the views were written with (a
// simulator's clock may run ahead of the wall clock).
const NowHeader = "X-Claimstream-Now"

func (s *server) stampNow(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(NowHeader, s.now().Format(time.RFC3339Nano))
		next.ServeHTTP(w, r)
	})
}

// authenticate checks the bearer token in constant time: the digests are
// compared, both tokens every time, so not even a token's length or which
// one matched shows in the timing (ConstantTimeCompare returns at once on
// different lengths). The request goes on with its Access (accessOf).
func (s *server) authenticate(next http.Handler) http.Handler {
	admin, read := sha256.Sum256([]byte(s.opts.Token)), sha256.Sum256([]byte(s.opts.ReadToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		access := AccessAdmin
		if !s.opts.NoAuth {
			access = AccessNone
			if s.opts.Session != nil {
				access = s.opts.Session(r)
			}
		}
		if access == AccessNone {
			msg := "missing or wrong bearer token"
			if s.opts.Token == "" && s.opts.ReadToken == "" {
				msg = "the server has no API token configured"
			}
			wait, outcome := s.checkToken(r, func() bool {
				got, ok := bearerToken(r.Header.Get("Authorization"))
				digest := sha256.Sum256([]byte(got))
				isAdmin := subtle.ConstantTimeCompare(digest[:], admin[:]) == 1
				isRead := subtle.ConstantTimeCompare(digest[:], read[:]) == 1
				switch {
				case ok && s.opts.Token != "" && isAdmin:
					access = AccessAdmin
				case ok && s.opts.ReadToken != "" && isRead:
					access = AccessRead
				}
				return access != AccessNone
			}, msg)
			switch outcome {
			case AuthThrottled:
				writeThrottled(w, wait)
				return
			case AuthRefused:
				w.Header().Set("WWW-Authenticate", `Bearer realm="claimstream"`)
				writeError(w, http.StatusUnauthorized, "Unauthenticated", msg)
				return
			}
		}
		Authenticated(r)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), accessKey{}, access)))
	})
}

type accessKey struct{}

// accessOf is what an authenticated request may do.
func accessOf(r *http.Request) Access {
	a, _ := r.Context().Value(accessKey{}).(Access)
	return a
}

// adminOnly refuses a route of the admin token to any other.
func adminOnly(route string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if accessOf(r) < AccessAdmin {
			writeError(w, http.StatusForbidden, "PermissionDenied", fmt.Sprintf("%s needs the admin API token (serve's --api-token); this token is read-only", route))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken is the token of an "Authorization: Bearer <token>" header.
// The scheme is matched without regard to case (RFC 9110 §11.1: "bearer"
// and "BEARER" are the same scheme).
func bearerToken(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// --- health -------------------------------------------------------------------

func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, Health{Status: "ok", Seq: s.views.Seq()})
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.logUnwritable(w) {
		return
	}
	ok, last, err := s.views.CaughtUpWithin(r.Context(), projections.ReadinessFoldWait)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "Unavailable", "cannot read the log: "+err.Error())
		return
	}
	seq := s.views.Seq()
	problem, blocking := s.views.Problem()
	if blocking {
		writeJSON(w, http.StatusServiceUnavailable, Health{Status: "log gaps", Seq: seq, Last: last, Problem: problem})
		return
	}
	if !ok {
		writeJSON(w, http.StatusServiceUnavailable, Health{Status: "catching up", Seq: seq, Last: last, Lag: last - min(seq, last), Problem: problem, PoolFile: s.poolFileRefused(), History: s.historyInMemory()})
		return
	}
	writeJSON(w, http.StatusOK, Health{Status: "ready", Seq: seq, Last: last, Problem: problem, PoolFile: s.poolFileRefused(), History: s.historyInMemory()})
}

// historyInMemory says why the cost or timeline index holds history in
// memory that belongs on disk, if one does: the server stays ready.
func (s *server) historyInMemory() string {
	s.indexMu.Lock()
	costs, timelines := s.costs, s.timelines
	s.indexMu.Unlock()
	var says []string
	say := func(index string, u chunkfile.Usage) {
		if u.Err != nil {
			says = append(says, fmt.Sprintf("the %s index holds %.1f MB of its history in memory: it cannot write it to disk: %v", index, float64(u.InMemory)/1e6, u.Err))
		}
	}
	if costs != nil {
		say("cost", costs.History())
	}
	if timelines != nil {
		say("timeline", timelines.History())
	}
	return strings.Join(says, "; ")
}

// poolFileRefused is the pool file's state when it was not applied, else
// nil.
func (s *server) poolFileRefused() *pool.FileState {
	if st := s.opts.PoolFile.State(); st != nil && !st.Applied {
		return st
	}
	return nil
}

// --- views --------------------------------------------------------------------

func (s *server) now() time.Time { return s.clk.Now().UTC() }

// read builds a response from the views under their read lock (nothing of
// the views escapes it: the objects are copies) and writes it.
func (s *server) read(w http.ResponseWriter, build func(st *projections.State, now time.Time) (any, error)) {
	var body any
	var err error
	now := s.now()
	s.views.Read(func(st *projections.State) {
		body, err = build(st, now)
		if err == nil {
			// Encode under the lock: the copies share slices of the views.
			body, err = json.Marshal(body)
		}
	})
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body.([]byte), '\n'))
}

func (s *server) listGroups(w http.ResponseWriter, r *http.Request) {
	all := r.URL.Query().Get("all") == "true"
	s.read(w, func(st *projections.State, now time.Time) (any, error) {
		return List[Group]{Seq: st.Seq, Items: groupsOf(st, now, all)}, nil
	})
}

func (s *server) getGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.read(w, func(st *projections.State, now time.Time) (any, error) {
		g := st.Groups[name]
		if g == nil {
			return nil, notFound("group %q not found", name)
		}
		return groupOf(st, g, now), nil
	})
}

func (s *server) listSlots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.read(w, func(st *projections.State, now time.Time) (any, error) {
		return List[Slot]{Seq: st.Seq, Items: slotsOf(st, now, q.Get("all") == "true", q.Get("group"))}, nil
	})
}

func (s *server) getSlot(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.read(w, func(st *projections.State, now time.Time) (any, error) {
		sl := st.Slots[name]
		if sl == nil {
			return nil, notFound("slot %q not found", name)
		}
		return slotOf(st, sl, now), nil
	})
}

func (s *server) listClaims(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.read(w, func(st *projections.State, now time.Time) (any, error) {
		return List[Claim]{Seq: st.Seq, Items: claimsOf(st, now, q.Get("group"), q.Get("slot"), projections.Phase(q.Get("phase")))}, nil
	})
}

func (s *server) getClaim(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.read(w, func(st *projections.State, now time.Time) (any, error) {
		c := st.Claims[name]
		if c == nil {
			return nil, notFound("claim %q is not in the live views (a collected claim is told by `claimstream audit claim %s --slot <slot>`)", name, name)
		}
		return claimOf(c, now), nil
	})
}

// --- commands -----------------------------------------------------------------

func (s *server) command(w http.ResponseWriter, r *http.Request, mk func(CommandRequest) decide.Command) {
	var req CommandRequest
	if r.Body != nil && r.ContentLength != 0 {
		// No body, or an empty one, is a command with no reason.
		if err := decodeBody(w, r, &req); err != nil && !errors.Is(err, errEmptyBody) {
			writeError(w, http.StatusBadRequest, "InvalidArgument", "request body: "+err.Error())
			return
		}
	}
	if req.By == "" {
		req.By = "api"
	}
	res, err := s.cmds.Execute(r.Context(), mk(req))
	if err != nil {
		s.fail(w, err)
		return
	}
	out := CommandResult{Seq: res.Last, Claims: res.Claims(), Events: []Event{}}
	if out.Seq == 0 {
		out.Seq = s.views.Seq()
	}
	for _, e := range res.Events {
		out.Events = append(out.Events, EventOf(e))
	}
	status := http.StatusOK
	if len(out.Claims) > 0 {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
}

func (s *server) claimSlot(w http.ResponseWriter, r *http.Request) {
	s.command(w, r, func(q CommandRequest) decide.Command {
		return decide.ManualClaim{Slot: r.PathValue("name"), By: q.By, Reason: q.Reason}
	})
}

func (s *server) deleteClaim(w http.ResponseWriter, r *http.Request) {
	s.command(w, r, func(q CommandRequest) decide.Command {
		return decide.DeleteClaim{Claim: r.PathValue("name"), By: q.By}
	})
}

func (s *server) decommission(w http.ResponseWriter, r *http.Request) {
	s.command(w, r, func(q CommandRequest) decide.Command {
		return decide.Decommission{Slot: r.PathValue("name"), By: q.By, Reason: q.Reason}
	})
}

func (s *server) recommission(w http.ResponseWriter, r *http.Request) {
	s.command(w, r, func(q CommandRequest) decide.Command {
		return decide.Recommission{Slot: r.PathValue("name"), By: q.By}
	})
}

// --- audit --------------------------------------------------------------------

func (s *server) slotHistory(ctx context.Context, slot string) ([]events.Event, error) {
	var evs []events.Event
	err := s.store.ReadAggregate(ctx, events.SlotAggregate(slot), func(e events.Event) error {
		evs = append(evs, e)
		return nil
	})
	return evs, err
}

func (s *server) auditSlot(w http.ResponseWriter, r *http.Request) {
	slot := r.PathValue("name")
	evs, err := s.slotHistory(r.Context(), slot)
	if err != nil {
		s.readFailed(w, r, "audit", err)
		return
	}
	if len(evs) == 0 {
		s.fail(w, notFound("slot %q has no events in the log", slot))
		return
	}
	writeJSON(w, http.StatusOK, Audit{Slot: slot, Group: groupOfEvents(evs), Claims: nonNil(audit.Claims(evs)), Lines: audit.Story(evs)})
}

// auditClaim finds the claim's slot in the views (live claims), else
// among the slots whose name the claim's starts with (a claim is named
// <slot>-<6 hex>, the slot cut at 40 characters), else in ?slot=.
func (s *server) auditClaim(w http.ResponseWriter, r *http.Request) {
	claim := r.PathValue("name")
	var candidates []string
	if slot := r.URL.Query().Get("slot"); slot != "" {
		candidates = []string{slot}
	} else {
		s.views.Read(func(st *projections.State) { candidates = claimSlots(st, claim) })
	}
	for _, slot := range candidates {
		evs, err := s.slotHistory(r.Context(), slot)
		if err != nil {
			s.readFailed(w, r, "audit", err)
			return
		}
		mine := audit.OfClaim(evs, claim)
		x, err := s.claimExpiry(r.Context(), claim, mine)
		if err != nil {
			s.readFailed(w, r, "audit", err)
			return
		}
		if len(mine) == 0 && (x == nil || x.Claim == nil) {
			continue
		}
		lines := audit.Story(mine)
		if x != nil {
			// The story starts midway: say so first, with what the
			// checkpoint knew, rather than tell part of it as the whole.
			lines = append([]audit.Line{audit.Expired(claim, *x)}, lines...)
		}
		group := groupOfEvents(mine)
		if group == "" && x != nil && x.Claim != nil {
			group = x.Claim.Group
		}
		writeJSON(w, http.StatusOK, Audit{Slot: slot, Group: group, Claim: claim, Claims: []string{claim}, Lines: lines})
		return
	}
	if x, err := s.claimExpiry(r.Context(), claim, nil); err == nil && x != nil {
		s.fail(w, notFound("claim %q is not in the log: %s", claim, audit.Expired(claim, *x).Text))
		return
	}
	msg := fmt.Sprintf("claim %q not found in the views nor in the history of a slot it could belong to; if it was collected, name its slot: `claimstream audit claim %s --slot <slot>`, or tell the whole slot: `claimstream audit slot <slot>`", claim, claim)
	if q := r.URL.Query().Get("slot"); q != "" {
		msg = fmt.Sprintf("claim %q is not in the history of slot %s; `claimstream audit slot %s` tells every claim of the slot", claim, q, q)
	}
	s.fail(w, notFound("%s", msg))
}

func groupOfEvents(evs []events.Event) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Data != nil {
			return evs[i].Data.Reference().Group
		}
	}
	return ""
}

// --- replay -------------------------------------------------------------------

func (s *server) replay(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var st *projections.State
	var at time.Time
	var err error
	switch {
	case q.Get("at") != "" && q.Get("seq") != "":
		writeError(w, http.StatusBadRequest, "InvalidArgument", "give at or seq, not both")
		return
	case q.Get("at") != "":
		at, err = time.Parse(time.RFC3339Nano, q.Get("at"))
		if err != nil {
			writeError(w, http.StatusBadRequest, "InvalidArgument", "at: want an RFC 3339 time such as 2026-03-04T03:12:00Z: "+err.Error())
			return
		}
		st, err = projections.ReplayUntil(r.Context(), s.store, s.views.Checkpoints(), at)
	case q.Get("seq") != "":
		seq, perr := strconv.ParseUint(q.Get("seq"), 10, 64)
		if perr != nil || seq == 0 {
			writeError(w, http.StatusBadRequest, "InvalidArgument", "seq: want a positive sequence number")
			return
		}
		last, lerr := s.store.LastSeq(r.Context())
		if lerr != nil {
			s.readFailed(w, r, "replay", lerr)
			return
		}
		if seq > last {
			s.fail(w, notFound("seq %d is past the log's end (%d)", seq, last))
			return
		}
		st, err = projections.ReplayTo(r.Context(), s.store, s.views.Checkpoints(), seq)
		if err == nil {
			e, gerr := s.store.Get(r.Context(), seq)
			if gerr != nil {
				err = gerr
			}
			at = e.Time
		}
	default:
		writeError(w, http.StatusBadRequest, "InvalidArgument", "give at=<RFC 3339 time> or seq=<n>")
		return
	}
	if s.foldFailed(w, r, err, "replay") {
		return
	}
	at = at.UTC()
	writeJSON(w, http.StatusOK, Replay{
		Seq: st.Seq, At: at.Format(time.RFC3339Nano),
		Groups: groupsOf(st, at, false), Slots: slotsOf(st, at, false, ""), Claims: claimsOf(st, at, "", "", ""),
	})
}

// --- errors and encoding ------------------------------------------------------

func notFound(format string, args ...any) error {
	return &decide.Error{Code: decide.CodeNotFound, Msg: fmt.Sprintf(format, args...)}
}

// StatusOf maps a command refusal to its HTTP status.
func StatusOf(code decide.Code) int {
	switch code {
	case decide.CodeInvalidArgument:
		return http.StatusBadRequest
	case decide.CodeNotFound:
		return http.StatusNotFound
	case decide.CodeFailedPrecondition:
		return http.StatusPreconditionFailed
	case decide.CodeUnavailable:
		return http.StatusServiceUnavailable
	case decide.CodeAborted:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func (s *server) fail(w http.ResponseWriter, err error) {
	code := decide.CodeOf(err)
	var limit *eventlog.ConsumerLimitError
	if code == 0 && (errors.Is(err, eventlog.ErrTooManyReaders) || errors.As(err, &limit)) {
		// Reads in flight end by themselves: ask again shortly.
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, decide.CodeUnavailable.String(), err.Error())
		return
	}
	if code == 0 {
		if errors.Is(err, context.Canceled) {
			return
		}
		s.log.Error("api request failed", "err", err)
		writeError(w, http.StatusInternalServerError, "Internal", err.Error())
		return
	}
	writeError(w, StatusOf(code), code.String(), err.Error())
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg, Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// ListenAndServe serves h on addr until ctx ends, then stops gracefully
// (in-flight requests get 5 seconds; followed event streams end), with
// lim's bounds on slow and unauthenticated clients.
func ListenAndServe(ctx context.Context, addr string, h http.Handler, lim ServerLimits) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("rest: listen %s: %w", addr, err)
	}
	return Serve(ctx, ln, h, lim)
}

// Serve is ListenAndServe on an open listener.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, lim ServerLimits) error {
	return serve(ctx, ln, h, nil, nil, lim)
}

// serve serves h on ln, over TLS when tc is set (see ServeTLS).
func serve(ctx context.Context, ln net.Listener, h http.Handler, tc *tls.Config, log *slog.Logger, lim ServerLimits) error {
	srv, ln := httpServer(ctx, ln, h, lim)
	errs := make(chan error, 1)
	if tc != nil {
		srv.TLSConfig = tc
		srv.ErrorLog = serverErrorLog(log)
		go func() { errs <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errs <- srv.Serve(ln) }()
	}
	select {
	case err := <-errs:
		return fmt.Errorf("rest: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-errs; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("rest: %w", err)
	}
	return nil
}

// foldFailed answers a failed fold of the log (a replay, a timeline) and
// reports whether it did: a damaged log is 412, history expired without a
// checkpoint 410, a log that cannot be read 503.
func (s *server) foldFailed(w http.ResponseWriter, r *http.Request, err error, what string) bool {
	if err == nil {
		return false
	}
	var truncated *projections.TruncatedLogError
	switch {
	case eventlog.GapsOf(err) != nil:
		writeError(w, http.StatusPreconditionFailed, "FailedPrecondition", "cannot "+what+" over a damaged log: "+err.Error())
	case errors.As(err, &truncated):
		writeError(w, http.StatusGone, "Expired", err.Error())
	default:
		s.readFailed(w, r, what, err)
	}
	return true
}
