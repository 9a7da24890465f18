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
	"runtime/debug"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// ServiceName is the full name of the externalgrpc service.
const ServiceName = "clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider"

// TLSConfig is the server side of the cloud-config's key/cert/cacert: the
// server's certificate and key, and, for mTLS, the CA that signs the
// clients' certificates. Each is a file path or PEM bytes (PEM wins).
type TLSConfig struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   []byte
	// ClientCAFile / ClientCAPEM, when set, turn on mTLS: a client must
	// present a certificate signed by this CA (RequireAndVerifyClientCert).
	ClientCAFile string
	ClientCAPEM  []byte
}

// ServerCredentials builds the gRPC transport credentials of a TLSConfig:
// TLS 1.2+, and mTLS when a client CA is given. A certificate given by file
// is re-read when the file changes (cert-manager rotates it in place).
func ServerCredentials(cfg TLSConfig) (credentials.TransportCredentials, error) {
	tc, err := serverTLS(cfg)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(tc), nil
}

func serverTLS(cfg TLSConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case len(cfg.CertPEM) > 0 || len(cfg.KeyPEM) > 0:
		cert, err := tls.X509KeyPair(cfg.CertPEM, cfg.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("provider tls: server certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	case cfg.CertFile != "" && cfg.KeyFile != "":
		r := &certReloader{certFile: cfg.CertFile, keyFile: cfg.KeyFile}
		if _, err := r.get(nil); err != nil {
			return nil, err
		}
		tc.GetCertificate = r.get
	default:
		return nil, errors.New("provider tls: a server certificate and key are required (cert and key)")
	}
	ca := cfg.ClientCAPEM
	if len(ca) == 0 && cfg.ClientCAFile != "" {
		b, err := os.ReadFile(cfg.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("provider tls: client CA: %w", err)
		}
		ca = b
	}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("provider tls: client CA: no PEM certificate found")
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// certReloader serves a key pair from files, re-reading them when either
// file's modification time changes.
type certReloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	certMod  time.Time
	keyMod   time.Time
	lastLook time.Time
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cert != nil && time.Since(r.lastLook) < time.Second {
		return r.cert, nil
	}
	r.lastLook = time.Now()
	ci, err1 := os.Stat(r.certFile)
	ki, err2 := os.Stat(r.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		if r.cert != nil {
			return r.cert, nil // keep serving the last good pair
		}
		return nil, fmt.Errorf("provider tls: %w", err)
	}
	if r.cert != nil && ci.ModTime().Equal(r.certMod) && ki.ModTime().Equal(r.keyMod) {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil // a rotation half written; the next look retries
		}
		return nil, fmt.Errorf("provider tls: server certificate: %w", err)
	}
	r.cert, r.certMod, r.keyMod = &cert, ci.ModTime(), ki.ModTime()
	return r.cert, nil
}

// NewGRPCServer returns a gRPC server with the provider, the health service
// (SERVING, for "" and ServiceName) and reflection registered. It refuses to
// build without creds unless plaintext is asked for explicitly, and refuses
// both at once. opts are appended (interceptors, keepalive...).
func NewGRPCServer(srv *Server, creds credentials.TransportCredentials, plaintext bool, opts ...grpc.ServerOption) (*grpc.Server, error) {
	switch {
	case srv == nil:
		return nil, errors.New("provider: no Server")
	case creds == nil && !plaintext:
		return nil, errors.New("provider: refusing to serve cluster-autoscaler without TLS; give a certificate or ask for plaintext explicitly")
	case creds != nil && plaintext:
		return nil, errors.New("provider: both TLS credentials and plaintext asked for")
	}
	all := []grpc.ServerOption{grpc.ChainUnaryInterceptor(recoverer(srv.log), logger(srv.log))}
	if creds != nil {
		all = append(all, grpc.Creds(creds))
	}
	all = append(all, opts...)
	gs := grpc.NewServer(all...)
	pb.RegisterCloudProviderServer(gs, srv)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(gs, withLogHealth(hs, srv.opts.LogHealth))
	reflection.Register(gs)
	return gs, nil
}

// ListenAndServe listens on addr, serves gs until ctx ends, then stops
// gracefully (forcefully after grace). It returns nil after a stop caused
// by ctx.
func ListenAndServe(ctx context.Context, addr string, gs *grpc.Server, grace time.Duration) error {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("provider: listen %s: %w", addr, err)
	}
	return Serve(ctx, lis, gs, grace)
}

// Serve serves gs on lis until ctx ends; see ListenAndServe.
func Serve(ctx context.Context, lis net.Listener, gs *grpc.Server, grace time.Duration) error {
	served := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-served:
			return
		}
		graceful := make(chan struct{})
		go func() { gs.GracefulStop(); close(graceful) }()
		select {
		case <-graceful:
		case <-time.After(grace):
			gs.Stop()
		}
	}()
	err := gs.Serve(lis)
	close(served)
	<-stopped
	gs.Stop()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// recoverer turns a handler's panic into Internal instead of taking the
// process (the leader) down.
func recoverer(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				log.ErrorContext(ctx, "provider RPC panicked", "rpc", info.FullMethod, "panic", p, "stack", string(debug.Stack()))
				resp, err = nil, status.Errorf(codes.Internal, "%s: internal error: %v", info.FullMethod, p)
			}
		}()
		return h(ctx, req)
	}
}

// logger logs every call at debug, with its code and duration.
func logger(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if !log.Enabled(ctx, slog.LevelDebug) {
			return h(ctx, req)
		}
		began := time.Now()
		resp, err := h(ctx, req)
		log.DebugContext(ctx, "provider RPC", "rpc", info.FullMethod, "code", status.Code(err).String(), "took", time.Since(began))
		return resp, err
	}
}
