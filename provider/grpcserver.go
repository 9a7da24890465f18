package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
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
	healthpb.RegisterHealthServer(gs, withLogHealth(hs, srv.opts.LogHealth, srv.views))
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
