package rest

import (
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"
)

// Failed authentications are throttled per client address, on the API
// (a missing or wrong bearer token) and on the dashboard's login form (a
// wrong token) alike, from one budget per address: a burst, then a steady
// rate. A wrong token from an address over its budget is answered 429
// with Retry-After, so a guesser on the LAN gets a few tries a second at
// most; the right token is always let through, so a guesser behind the
// same NAT or proxy cannot lock the others out. Successful requests never
// touch the budget.

// Surfaces of an authentication failure (the metric's surface label).
const (
	AuthSurfaceAPI       = "api"
	AuthSurfaceDashboard = "dashboard"
)

// Outcomes of an authentication failure (the metric's outcome label):
// refused is a token checked and found wrong (or missing); throttled is a
// request turned away, unchecked, because its address is over its budget.
const (
	AuthRefused   = "refused"
	AuthThrottled = "throttled"
)

// Defaults of AuthLimitOptions.
const (
	DefaultAuthFailureBurst = 10
	DefaultAuthFailureEvery = time.Second
	DefaultAuthMaxClients   = 10000
	DefaultAuthClientIdle   = 10 * time.Minute
	// authWarnPerEpisode is how many refusals of an episode get their
	// own WARN line; the rest are told in summaries.
	authWarnPerEpisode = 3
	// authSummaryEvery is how often a continuing episode is summed up.
	authSummaryEvery = time.Minute
)

// AuthLimitOptions configure an AuthLimiter; the zero value takes the
// defaults.
type AuthLimitOptions struct {
	// Burst is how many failures an address may have at once
	// (DefaultAuthFailureBurst).
	Burst int
	// Every is how often an address gets one more failure back
	// (DefaultAuthFailureEvery).
	Every time.Duration
	// MaxClients caps the addresses remembered; past it the one idle
	// longest is forgotten (DefaultAuthMaxClients).
	MaxClients int
	// Idle is how long an address is remembered after its last failure
	// (DefaultAuthClientIdle).
	Idle time.Duration
	// Clock times the budgets (the real clock if nil).
	Clock  clock.PassiveClock
	Logger *slog.Logger
	// OnFailure, when set, is told of every failure by surface and
	// outcome (the metrics).
	OnFailure func(surface, outcome string)
	// TrustedProxies are the reverse proxies in front of the API: a
	// request whose connection comes from one of them is counted against
	// the client its X-Forwarded-For names (ForwardedClient). Empty: the
	// header is ignored, as any client may write it.
	TrustedProxies []netip.Prefix
}

// AuthLimiter throttles failed authentications per client address. One
// limiter serves the API and the dashboard, so their failures share an
// address's budget. It is safe for concurrent use.
type AuthLimiter struct {
	opts AuthLimitOptions
	log  *slog.Logger

	mu sync.Mutex
	// clients are the addresses with recent failures, least recently
	// active evicted first past MaxClients, expired after Idle.
	clients *cache.LRUExpireCache
}

// authClient is one address's budget and its current episode: from its
// first failure with a full budget until the budget is full again.
type authClient struct {
	lim *rate.Limiter

	episodeStart time.Time
	refused      int  // refusals in the episode
	warned       int  // refusals of the episode logged one by one
	throttling   bool // the episode's throttling line is logged

	// The window since the last summary line.
	windowStart     time.Time
	windowRefused   int
	windowThrottled int
	windowUnlogged  int
}

// NewAuthLimiter returns a limiter with o's settings, defaults for the
// unset ones.
func NewAuthLimiter(o AuthLimitOptions) *AuthLimiter {
	if o.Burst <= 0 {
		o.Burst = DefaultAuthFailureBurst
	}
	if o.Every <= 0 {
		o.Every = DefaultAuthFailureEvery
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultAuthMaxClients
	}
	if o.Idle <= 0 {
		o.Idle = DefaultAuthClientIdle
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnFailure == nil {
		o.OnFailure = func(string, string) {}
	}
	return &AuthLimiter{opts: o, log: o.Logger, clients: cache.NewLRUExpireCacheWithClock(o.MaxClients, o.Clock)}
}

// ClientKey is the budget a request is counted against: the host part of
// its RemoteAddr, never a header the client writes (X-Forwarded-For
// counts only from a trusted proxy: ForwardedClient). An IPv6 client is counted by its /64, the block one
// host is commonly handed, so it cannot dodge its budget by stepping
// through its own addresses.
func ClientKey(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	return addrKey(addr.Unmap().WithZone(""))
}

// addrKey is the budget of an address: itself, or an IPv6 address's /64.
func addrKey(addr netip.Addr) string {
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

// clientKey is the budget r counts against: its connection's address,
// or, from a trusted proxy, the client X-Forwarded-For names.
func (l *AuthLimiter) clientKey(r *http.Request) string {
	if len(l.opts.TrustedProxies) == 0 {
		return ClientKey(r.RemoteAddr)
	}
	return ForwardedClient(r.RemoteAddr, r.Header.Values("X-Forwarded-For"), l.opts.TrustedProxies)
}

// ForwardedClient is the ClientKey of the client behind trusted proxies:
// X-Forwarded-For read from its right end (the entry the proxy next to
// us wrote), past every entry that is itself a trusted proxy. An entry
// that is not an address ends the walk at the hop before it: what lies
// left of it is the client's own writing. A connection from an address
// that is not a trusted proxy is its own client, whatever it sends.
func ForwardedClient(remoteAddr string, forwardedFor []string, trusted []netip.Prefix) string {
	isTrusted := func(a netip.Addr) bool {
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	client, ok := parseHostAddr(remoteAddr)
	if !ok || !isTrusted(client) {
		return ClientKey(remoteAddr)
	}
	var hops []string
	for _, v := range forwardedFor {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHostAddr(strings.TrimSpace(hops[i]))
		if !ok {
			break
		}
		client = a
		if !isTrusted(a) {
			break
		}
	}
	return addrKey(client)
}

// parseHostAddr is the IP address of "ip", "ip:port" or "[ipv6]:port".
func parseHostAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// Check runs check, the comparison of the request's token. One that
// passes answers "" and spends nothing, whatever the address's budget.
// One that fails from an address over its budget of failures answers
// AuthThrottled and how long until the address may try again; otherwise
// it answers AuthRefused and is counted
// against the address (the first few of an episode logged as refusal, a
// WARN line with the address and attrs; the rest only summed up). Checks
// are run one at a time, so concurrent guesses cannot overrun the budget.
func (l *AuthLimiter) Check(r *http.Request, surface string, check func() bool, refusal string, attrs ...any) (retryAfter time.Duration, outcome string) {
	key := l.clientKey(r)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.opts.Clock.Now()
	var c *authClient
	if v, ok := l.clients.Get(key); ok {
		c = v.(*authClient)
		if tokens := c.lim.TokensAt(now); tokens < 1 {
			if check() {
				return 0, ""
			}
			l.throttled(key, c, surface, now, tokens)
			return l.wait(tokens), AuthThrottled
		}
	}
	if check() {
		return 0, ""
	}
	if c == nil {
		c = &authClient{lim: rate.NewLimiter(rate.Every(l.opts.Every), l.opts.Burst)}
	}
	l.refused(key, c, surface, now, refusal, attrs)
	return 0, AuthRefused
}

// throttled counts and logs a request turned away.
func (l *AuthLimiter) throttled(key string, c *authClient, surface string, now time.Time, tokens float64) {
	l.clients.Add(key, c, l.opts.Idle)
	c.windowThrottled++
	if !c.throttling {
		c.throttling = true
		l.log.Warn(fmt.Sprintf("throttling failed authentications from %s: %d refused in the last %d s", key, c.refused, seconds(now.Sub(c.episodeStart))),
			"remote", key, "surface", surface, "refused", c.refused, "retry_after_s", seconds(l.wait(tokens)))
	}
	l.summarize(key, c, now)
	l.opts.OnFailure(surface, AuthThrottled)
}

// refused spends one failure of the address's budget, and logs it while
// the episode is young.
func (l *AuthLimiter) refused(key string, c *authClient, surface string, now time.Time, msg string, attrs []any) {
	if c.lim.TokensAt(now) >= float64(l.opts.Burst) {
		// A full budget: the address stopped long enough that this is
		// a new episode.
		c.episodeStart, c.refused, c.warned, c.throttling = now, 0, 0, false
		c.windowStart, c.windowRefused, c.windowThrottled, c.windowUnlogged = now, 0, 0, 0
	}
	c.lim.AllowN(now, 1)
	l.clients.Add(key, c, l.opts.Idle)
	c.refused++
	c.windowRefused++
	switch {
	case c.warned < authWarnPerEpisode:
		c.warned++
		l.log.Warn(msg, append([]any{"remote", key, "surface", surface}, attrs...)...)
	case c.warned == authWarnPerEpisode:
		c.warned++
		c.windowUnlogged++
		l.log.Warn(fmt.Sprintf("further failed authentications from %s are summed up once a minute while they go on", key), "remote", key, "surface", surface)
	default:
		c.windowUnlogged++
	}
	l.summarize(key, c, now)
	l.opts.OnFailure(surface, AuthRefused)
}

// summarize logs one line for a continuing episode at most every
// authSummaryEvery, if anything went unlogged since the last one.
func (l *AuthLimiter) summarize(key string, c *authClient, now time.Time) {
	if now.Sub(c.windowStart) < authSummaryEvery {
		return
	}
	if c.windowUnlogged > 0 || c.windowThrottled > 0 {
		l.log.Warn(fmt.Sprintf("failed authentications from %s go on: %d refused, %d throttled in the last %d s", key, c.windowRefused, c.windowThrottled, seconds(now.Sub(c.windowStart))),
			"remote", key, "refused", c.windowRefused, "throttled", c.windowThrottled)
	}
	c.windowStart, c.windowRefused, c.windowThrottled, c.windowUnlogged = now, 0, 0, 0
}

// wait is how long until a budget with tokens has one failure left.
func (l *AuthLimiter) wait(tokens float64) time.Duration {
	return time.Duration((1 - tokens) * float64(l.opts.Every))
}

// clientCount is how many addresses are remembered and not yet expired
// (never more than MaxClients).
func (l *AuthLimiter) clientCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.clients.Keys())
}

// seconds rounds d up to whole seconds, at least 1: a Retry-After of 0
// would invite an immediate retry that is refused again.
func seconds(d time.Duration) int {
	s := int(math.Ceil(d.Seconds()))
	if s < 1 {
		return 1
	}
	return s
}

// checkToken runs check through the limiter, if any: "" when the token is
// good, else AuthRefused or AuthThrottled (with the wait).
func (s *server) checkToken(r *http.Request, check func() bool, refusal string) (time.Duration, string) {
	if s.opts.AuthLimit == nil {
		if check() {
			return 0, ""
		}
		return 0, AuthRefused
	}
	return s.opts.AuthLimit.Check(r, AuthSurfaceAPI, check, "api request refused: "+refusal, "method", r.Method, "path", r.URL.Path)
}

// writeThrottled answers 429 to a request whose address is over its
// budget of failed authentications.
func writeThrottled(w http.ResponseWriter, wait time.Duration) {
	secs := seconds(wait)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	writeError(w, http.StatusTooManyRequests, "ResourceExhausted",
		fmt.Sprintf("too many failed authentications from this address; try again in %d s", secs))
}
