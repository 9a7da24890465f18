package rest

import (
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
)

// ServerLimits bound what a client may hold of an HTTP server: slow
// clients are cut, and connections that have not authenticated are
// capped, so they cannot use up the file descriptors the store needs nor
// crowd out the clients that did authenticate. Zero fields take the
// defaults.
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
	// not yet made an authenticated request; past it new connections
	// wait in the listen queue until one closes or authenticates.
	MaxUnauthenticated int
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
	return l
}

// httpServer is an http.Server for h with the limits, serving ln wrapped
// so that its unauthenticated connections are capped.
func httpServer(ctx context.Context, ln net.Listener, h http.Handler, lim ServerLimits) (*http.Server, net.Listener) {
	lim = lim.withDefaults()
	gl := newGateListener(ln, lim.MaxUnauthenticated)
	srv := &http.Server{
		Handler:           bodyDeadline(h, lim.BodyTimeout),
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
				return context.WithValue(ctx, gateKey{}, g)
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
// counts against ServerLimits.MaxUnauthenticated. The API calls it for a
// request that carries the right token or a dashboard session.
func Authenticated(r *http.Request) {
	if g, ok := r.Context().Value(gateKey{}).(*gatedConn); ok {
		g.release()
	}
}

type gateKey struct{}

// gateListener accepts a connection only while fewer than cap accepted
// ones are still unauthenticated (netutil.LimitListener's wait, counting
// only those).
type gateListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newGateListener(ln net.Listener, n int) *gateListener {
	return &gateListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *gateListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &gatedConn{Conn: c, l: l}, nil
}

func (l *gateListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// gatedConn holds a slot of its listener until it authenticates or
// closes.
type gatedConn struct {
	net.Conn
	l    *gateListener
	once sync.Once
}

func (c *gatedConn) release() { c.once.Do(func() { <-c.l.slots }) }

func (c *gatedConn) Close() error {
	c.release()
	return c.Conn.Close()
}
