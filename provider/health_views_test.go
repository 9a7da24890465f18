package provider

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
)

// The gRPC health service answers as /readyz does: NOT_SERVING, saying
// why, while the provider's views are behind the log (a replica catching
// up after a start or a failover), and SERVING once they are current.
func TestHealthIsNotServingWhileTheViewsCatchUp(t *testing.T) {
	h := handlerstest.New(t)
	h.Declare("workers", events.GroupSpec{}, handlerstest.Slots("w", 2)...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	views := projections.NewRunner(h.Store, projections.RunnerOptions{})
	if err := views.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Written after the views were built and before they run: behind.
	h.Declare("more", events.GroupSpec{}, "m-0")

	gs, err := NewGRPCServer(New(views, h.Service, h.Clock, Options{Logger: discard}), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, gs, time.Second) }()
	defer func() { cancel(); <-done }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	check := func() (healthpb.HealthCheckResponse_ServingStatus, string) {
		var tr metadata.MD
		hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: ServiceName}, grpc.Trailer(&tr))
		if err != nil {
			t.Fatal(err)
		}
		return hr.GetStatus(), strings.Join(tr.Get(LogReasonTrailer), "")
	}
	if st, why := check(); st != healthpb.HealthCheckResponse_NOT_SERVING || !strings.Contains(why, "views catching up") {
		t.Fatalf("health with views behind the log: %v %q", st, why)
	}
	go func() { _ = views.Run(ctx) }()
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if st, why := check(); st != healthpb.HealthCheckResponse_SERVING {
			return &notServing{why}
		}
		return nil
	})
}

type notServing struct{ why string }

func (n *notServing) Error() string { return "not serving: " + n.why }
