package rest

import (
	"container/list"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of ServerLimits.
const (
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultBodyTimeout        = 30 * time.Second
	DefaultWriteTimeout       = 2 * time.Minute
	DefaultIdleTimeout        = 2 * time.Minute
	DefaultMaxHeaderBytes     = 64 << 10
	DefaultMaxUnauthenticated = 256
	// DefaultMaxUnauthenticatedPerAddress leaves room for a NAT or a
	// proxy's clients while no one address holds most of the cap.
	DefaultMaxUnauthenticatedPerAddress = 32
)

// ServerLimits bound what a client may hold of an HTTP server: slow
// clients are cut, and connections that have not authenticated are
// capped and closed after each answer, so they cannot use up the file
// descriptors the store needs nor crowd out the clients that did
// authenticate, or the probes. Zero fields take the defaults.
type ServerLimits struct {
	// ReadHeaderTimeout is how long a request's headers may take to
	// arrive.
	ReadHeaderTimeout time.Duration
	// BodyTimeout is how long a request's body may take to arrive, from
	// its headers.
	BodyTimeout time.Duration
	// WriteTimeout is how long an answer may take, from the request's
	// headers; streamed answers (followed listings, server-sent events,
	// exports, backups, what-if progress) are exempt.
	WriteTimeout time.Duration
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request.
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's headers.
	MaxHeaderBytes int
	// MaxUnauthenticated caps the connections open at once that have
	// not yet made an authenticated request; past it a new connection
	// closes the oldest of them.
	MaxUnauthenticated int
	// MaxUnauthenticatedPerAddress caps those of one client address (an
	// IPv6 client's /64); past it a new connection closes the oldest of
	// that address.
	MaxUnauthenticatedPerAddress int
}

func (l ServerLimits) withDefaults() ServerLimits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
	def(&l.BodyTimeout, DefaultBodyTimeout)
	def(&l.WriteTimeout, DefaultWriteTimeout)
	def(&l.IdleTimeout, DefaultIdleTimeout)
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if l.MaxUnauthenticated <= 0 {
		l.MaxUnauthenticated = DefaultMaxUnauthenticated
	}
	if l.MaxUnauthenticatedPerAddress <= 0 {
		l.MaxUnauthenticatedPerAddress = DefaultMaxUnauthenticatedPerAddress
	}
	l.MaxUnauthenticatedPerAddress = min(l.MaxUnauthenticatedPerAddress, l.MaxUnauthenticated)
	return l
}

// httpServer is an http.Server for h with the limits, serving ln wrapped
// so that its unauthenticated connections are capped; they are closed
// after each answer.
func httpServer(ctx context.Context, ln net.Listener, h http.Handler, lim ServerLimits) (*http.Server, net.Listener) {
	lim = lim.withDefaults()
	gl := newGateListener(ln, lim.MaxUnauthenticated, lim.MaxUnauthenticatedPerAddress)
	srv := &http.Server{
		Handler:           closeUnauthenticated(bodyDeadline(h, lim.BodyTimeout)),
		ReadHeaderTimeout: lim.ReadHeaderTimeout,
		WriteTimeout:      lim.WriteTimeout,
		IdleTimeout:       lim.IdleTimeout,
		MaxHeaderBytes:    lim.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if g, ok := c.(*gatedConn); ok {
				return context.WithValue(ctx, gateConnKey{}, g)
			}
			return ctx
		},
	}
	return srv, gl
}

// bodyDeadline gives a request's body d to arrive. The deadline is lifted
// once the body is read whole: the connection's read then only watches
// for the client going away, which must not end a long answer.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// Authenticated marks r's connection as authenticated: it no longer
// counts against ServerLimits.MaxUnauthenticated, and it is kept alive
// after the answer. The API calls it for a request that carries the right
// token or a dashboard session.
func Authenticated(r *http.Request) {
	if u, ok := r.Context().Value(gateKey{}).(*unauthenticatedRequest); ok {
		u.conn.release()
		u.header.Del("Connection")
	}
}

type gateKey struct{}

// unauthenticatedRequest is a request on a connection that has not
// authenticated: its answer closes the connection unless the request
// authenticates.
type unauthenticatedRequest struct {
	conn   *gatedConn
	header http.Header
}

// closeUnauthenticated answers a request of a connection that has not
// authenticated with "Connection: close" (HTTP/2: a GOAWAY), so such a
// connection holds its place among the unauthenticated for one request at
// most, never for a keep-alive's idle time.
func closeUnauthenticated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g, ok := r.Context().Value(gateConnKey{}).(*gatedConn); ok && !g.authenticated() {
			w.Header().Set("Connection", "close")
			r = r.WithContext(context.WithValue(r.Context(), gateKey{}, &unauthenticatedRequest{conn: g, header: w.Header()}))
		}
		h.ServeHTTP(w, r)
	})
}

type gateConnKey struct{}

// gateListener caps the accepted connections that have not
// authenticated, at most max in all and perAddr from one client address
// (ClientKey). Accept never waits: a new connection past a cap closes the
// oldest unauthenticated one (of its address, else of all). Waiting would
// let whoever holds the cap lock everyone else out; closing the oldest
// cuts the slow and idle first, while a client that sends its request at
// once (the CLI, a probe, a browser) is served before its turn comes.
type gateListener struct {
	net.Listener
	max, perAddr int

	mu     sync.Mutex
	open   list.List // of *gatedConn, unauthenticated, oldest first
	byAddr map[string]int
}

func newGateListener(ln net.Listener, max, perAddr int) *gateListener {
	return &gateListener{Listener: ln, max: max, perAddr: perAddr, byAddr: map[string]int{}}
}

func (l *gateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	g := &gatedConn{Conn: c, l: l, addr: ClientKey(c.RemoteAddr().String())}
	l.mu.Lock()
	var shed *gatedConn
	if l.byAddr[g.addr] >= l.perAddr {
		for e := l.open.Front(); e != nil; e = e.Next() {
			if o := e.Value.(*gatedConn); o.addr == g.addr {
				shed = o
				break
			}
		}
	} else if l.open.Len() >= l.max {
		shed = l.open.Front().Value.(*gatedConn)
	}
	if shed != nil {
		l.removeLocked(shed)
	}
	g.elem = l.open.PushBack(g)
	l.byAddr[g.addr]++
	l.mu.Unlock()
	if shed != nil {
		_ = shed.Conn.Close()
	}
	return g, nil
}

// removeLocked takes g out of the unauthenticated, once.
func (l *gateListener) removeLocked(g *gatedConn) {
	if g.elem == nil {
		return
	}
	l.open.Remove(g.elem)
	g.elem = nil
	if l.byAddr[g.addr]--; l.byAddr[g.addr] <= 0 {
		delete(l.byAddr, g.addr)
	}
}

// unauthenticated is how many accepted connections have not
// authenticated, in all and from addr.
func (l *gateListener) unauthenticated(addr string) (all, fromAddr int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open.Len(), l.byAddr[addr]
}

// gatedConn counts among its listener's unauthenticated connections
// until it authenticates or closes.
type gatedConn struct {
	net.Conn
	l    *gateListener
	addr string
	elem *list.Element // in l.open while unauthenticated; guarded by l.mu
}

func (c *gatedConn) release() {
	c.l.mu.Lock()
	c.l.removeLocked(c)
	c.l.mu.Unlock()
}

func (c *gatedConn) authenticated() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.elem == nil
}

func (c *gatedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
