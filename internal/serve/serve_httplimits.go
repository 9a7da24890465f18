package serve

import (
	"github.com/spf13/pflag"

	"github.com/claimstream/claimstream/provider/rest"
)

// httpLimitFlags are serve's bounds on HTTP clients, for the REST API
// (and dashboard) and the metrics server alike (rest.ServerLimits). A
// bound cannot be switched off: 0 takes its default.
type httpLimitFlags struct{ rest.ServerLimits }

func (o *httpLimitFlags) addFlags(f *pflag.FlagSet) {
	f.DurationVar(&o.ReadHeaderTimeout, "http-read-header-timeout", rest.DefaultReadHeaderTimeout, "HTTP servers (API, dashboard, metrics): how long a request's headers may take to arrive (and a TLS handshake)")
	f.DurationVar(&o.BodyTimeout, "http-body-timeout", rest.DefaultBodyTimeout, "HTTP servers: how long a request's body may take to arrive after its headers")
	f.DurationVar(&o.WriteTimeout, "http-write-timeout", rest.DefaultWriteTimeout, "HTTP servers: how long an answer may take after the request's headers (streamed answers such as SSE, --follow, export, backup and what-if are exempt)")
	f.DurationVar(&o.IdleTimeout, "http-idle-timeout", rest.DefaultIdleTimeout, "HTTP servers: how long a kept-alive connection may wait for its next request")
	f.IntVar(&o.MaxHeaderBytes, "http-max-header-bytes", rest.DefaultMaxHeaderBytes, "HTTP servers: the most bytes of a request's headers")
	f.IntVar(&o.MaxUnauthenticated, "http-max-unauthenticated-conns", rest.DefaultMaxUnauthenticated, "HTTP servers: the most connections open at once that have not made an authenticated request (each is closed after its answer); past it a new one closes the oldest")
	f.IntVar(&o.MaxUnauthenticatedPerAddress, "http-max-unauthenticated-per-ip", rest.DefaultMaxUnauthenticatedPerAddress, "HTTP servers: the most of those from one client address (an IPv6 /64); past it a new one closes the address's oldest")
}

// Caps of the metrics server: it has no authentication, so every
// connection counts as unauthenticated, and its clients are a scraper
// or two and an operator's profiler.
const (
	metricsMaxConns        = 32
	metricsMaxConnsPerAddr = 8
)

// metrics is the limits of the metrics server: the same timeouts, caps of
// its own (no larger than the flags'), so that a flood of it holds few
// file descriptors.
func (o httpLimitFlags) metrics() rest.ServerLimits {
	l := o.ServerLimits
	l.MaxUnauthenticated = capAt(l.MaxUnauthenticated, metricsMaxConns)
	l.MaxUnauthenticatedPerAddress = capAt(l.MaxUnauthenticatedPerAddress, metricsMaxConnsPerAddr)
	return l
}

// capAt is v, or limit when v is larger or unset (0 or less).
func capAt(v, limit int) int {
	if v <= 0 {
		return limit
	}
	return min(v, limit)
}
