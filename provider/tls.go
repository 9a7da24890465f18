package provider

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"k8s.io/utils/clock"
)

// TLSConfig is the server side of the cloud-config's key/cert/cacert: the
// server's certificate and key, and, for mTLS, the CA that signs the
// clients' certificates. Each is a file path or PEM bytes (PEM wins). The
// REST API's --api-tls-cert/--api-tls-key use the same loader.
type TLSConfig struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
	// ClientCAFile / ClientCAPEM, when set, turn on mTLS: a client must
	// present a certificate signed by this CA (RequireAndVerifyClientCert).
	ClientCAFile string
	ClientCAPEM  []byte
	// Logger receives the certificate reloads (info), the failed ones
	// (warn) and the refused handshakes (debug). Default: slog.Default().
	Logger *slog.Logger
	// Clock paces the look at the files (at most once a second).
	// Default: the real clock.
	Clock clock.PassiveClock
	// Name says whose certificate it is in logs and errors ("provider",
	// "api"). Default: "provider".
	Name string
	// OnReloadFailure, if set, is called with Name once per failed
	// rotation (when it is logged): a metric's hook.
	OnReloadFailure func(name string)
}

func (cfg TLSConfig) withDefaults() TLSConfig {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Name == "" {
		cfg.Name = "provider"
	}
	return cfg
}

// ServerCredentials builds the gRPC transport credentials of a TLSConfig:
// TLS 1.2+, and mTLS when a client CA is given. A certificate given by file
// is re-read when the file changes (cert-manager rotates it in place). A
// refused handshake is logged at debug with the client's address.
func ServerCredentials(cfg TLSConfig) (credentials.TransportCredentials, error) {
	cfg = cfg.withDefaults()
	tc, err := ServerTLS(cfg)
	if err != nil {
		return nil, err
	}
	return handshakeLogger{TransportCredentials: credentials.NewTLS(tc), log: cfg.Logger, name: cfg.Name}, nil
}

// ServerTLS is the tls.Config of a TLSConfig, for any server (gRPC, HTTP).
func ServerTLS(cfg TLSConfig) (*tls.Config, error) {
	cfg = cfg.withDefaults()
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case len(cfg.CertPEM) > 0 || len(cfg.KeyPEM) > 0:
		cert, err := tls.X509KeyPair(cfg.CertPEM, cfg.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s tls: server certificate: %w", cfg.Name, err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case cfg.CertFile != "" && cfg.KeyFile != "":
		r := &certReloader{certFile: cfg.CertFile, keyFile: cfg.KeyFile, log: cfg.Logger, clock: cfg.Clock, name: cfg.Name, onFailure: cfg.OnReloadFailure}
		if _, err := r.get(nil); err != nil {
			return nil, err
		}
		tc.GetCertificate = r.get
	default:
		return nil, fmt.Errorf("%s tls: a server certificate and key are required (cert and key)", cfg.Name)
	}
	ca := cfg.ClientCAPEM
	if len(ca) == 0 && cfg.ClientCAFile != "" {
		b, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("%s tls: client CA: %w", cfg.Name, err)
		}
		ca = b
	}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("%s tls: client CA: no PEM certificate found", cfg.Name)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// certReloader serves a key pair from files, re-reading them when either
// file's modification time changes. A pair that does not load (a rotation
// half written, garbage, a deleted file) leaves the last good pair in
// service; it is logged once per change of the files, as is a reload.
type certReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	clock             clock.PassiveClock
	name              string
	onFailure         func(name string)

	mu       sync.Mutex
	cert     *tls.Certificate
	certMod  time.Time
	keyMod   time.Time
	lastLook time.Time
	// failed is the failure last logged, so a broken file is reported
	// once, not on every handshake.
	failed string
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.cert != nil && now.Sub(r.lastLook) < time.Second {
		return r.cert, nil
	}
	r.lastLook = now
	ci, err1 := os.Stat(r.certFile)
	ki, err2 := os.Stat(r.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		if r.cert != nil {
			r.warn("stat", err)
			return r.cert, nil
		}
		return nil, fmt.Errorf("%s tls: %w", r.name, err)
	}
	if r.cert != nil && ci.ModTime().Equal(r.certMod) && ki.ModTime().Equal(r.keyMod) {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			r.warn(ci.ModTime().String()+ki.ModTime().String(), err)
			return r.cert, nil
		}
		return nil, fmt.Errorf("%s tls: server certificate: %w", r.name, err)
	}
	if r.cert != nil {
		r.log.Info("TLS certificate reloaded", "server", r.name, "cert", r.certFile, "key", r.keyFile)
	}
	r.cert, r.certMod, r.keyMod, r.failed = &cert, ci.ModTime(), ki.ModTime(), ""
	return r.cert, nil
}

// warn logs a failed reload once per distinct failure (the files' state
// and the error).
func (r *certReloader) warn(state string, err error) {
	key := state + "\x00" + err.Error()
	if key == r.failed {
		return
	}
	r.failed = key
	r.log.Warn("TLS certificate not reloaded; still serving the previous one", "server", r.name, "cert", r.certFile, "key", r.keyFile, "err", err)
	if r.onFailure != nil {
		r.onFailure(r.name)
	}
}

// handshakeLogger logs the handshakes the TLS credentials refuse (a
// plaintext client, an unknown CA, no client certificate) at debug, with
// the client's address: grpc-go itself only tells its own logger.
type handshakeLogger struct {
	credentials.TransportCredentials
	log  *slog.Logger
	name string
}

func (h handshakeLogger) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, info, err := h.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		h.log.LogAttrs(context.Background(), slog.LevelDebug, "TLS handshake refused", slog.String("server", h.name), slog.String("remote", conn.RemoteAddr().String()), slog.String("reason", err.Error()))
	}
	return c, info, err
}

func (h handshakeLogger) Clone() credentials.TransportCredentials {
	return handshakeLogger{TransportCredentials: h.TransportCredentials.Clone(), log: h.log, name: h.name}
}
