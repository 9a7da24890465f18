package rest

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// ListenAndServeTLS is ListenAndServe over TLS: tc holds the certificate
// (provider.ServerTLS builds it, re-reading rotated files). Without TLS
// the bearer token crosses the network in clear. Refused handshakes are
// logged at debug on log, with the client's address and the reason.
func ListenAndServeTLS(ctx context.Context, addr string, h http.Handler, tc *tls.Config, log *slog.Logger, lim ServerLimits) error {
	if tc == nil {
		return fmt.Errorf("rest: listen %s: no TLS configuration", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("rest: listen %s: %w", addr, err)
	}
	return serve(ctx, ln, h, tc, log, lim)
}

// ServeTLS is ListenAndServeTLS on an open listener.
func ServeTLS(ctx context.Context, ln net.Listener, h http.Handler, tc *tls.Config, log *slog.Logger, lim ServerLimits) error {
	if tc == nil {
		return fmt.Errorf("rest: serve %s: no TLS configuration", ln.Addr())
	}
	return serve(ctx, ln, h, tc, log, lim)
}

// serverErrorLog bridges net/http's error log to slog: a refused TLS
// handshake ("http: TLS handshake error from <addr>: <reason>") is a debug
// line with the address and the reason; anything else is a warning.
func serverErrorLog(l *slog.Logger) *log.Logger {
	if l == nil {
		l = slog.Default()
	}
	return log.New(errorLogWriter{l}, "", 0)
}

type errorLogWriter struct{ log *slog.Logger }

const handshakePrefix = "http: TLS handshake error from "

func (w errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if rest, ok := strings.CutPrefix(msg, handshakePrefix); ok {
		addr, reason, _ := strings.Cut(rest, ": ")
		w.log.Debug("TLS handshake refused", "server", "api", "remote", addr, "reason", reason)
		return len(p), nil
	}
	w.log.Warn("REST API server", "err", msg)
	return len(p), nil
}
