package telemetry

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// claimstream_provider_requests_total{method,code}: cluster-autoscaler's
// calls to the gRPC provider, by method of the externalgrpc CloudProvider
// service and gRPC status code. Every method's code="OK" series is there
// at 0 from the start, so an alert can tell a cluster-autoscaler that
// stopped calling (Refresh not rising) from a new pod.
const InstProviderRequests = "claimstream_provider_requests"

const descProviderRequests = "Calls of cluster-autoscaler to the gRPC provider (the externalgrpc CloudProvider service), by method and gRPC status code."

// ProviderMethods are the methods of the externalgrpc CloudProvider
// service, the values of the method label.
func ProviderMethods() []string {
	out := make([]string, 0, len(pb.CloudProvider_ServiceDesc.Methods))
	for _, m := range pb.CloudProvider_ServiceDesc.Methods {
		out = append(out, m.MethodName)
	}
	return out
}

// providerRequests counts the provider's calls: a stats handler around
// otelgrpc's, so GRPCServerOption stays one option.
type providerRequests struct {
	stats.Handler
	count metric.Int64Counter
}

type methodKey struct{}

func newProviderRequests(meter metric.Meter, inner stats.Handler) (*providerRequests, error) {
	c, err := meter.Int64Counter(InstProviderRequests, metric.WithDescription(descProviderRequests))
	if err != nil {
		return nil, err
	}
	for _, m := range ProviderMethods() {
		c.Add(context.Background(), 0, metric.WithAttributes(attribute.String("method", m), attribute.String("code", "OK")))
	}
	return &providerRequests{Handler: inner, count: c}, nil
}

func (p *providerRequests) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	// Only the CloudProvider's methods: health and reflection calls are
	// not cluster-autoscaler's, and the label stays bounded.
	if m, ok := strings.CutPrefix(info.FullMethodName, "/"+pb.CloudProvider_ServiceDesc.ServiceName+"/"); ok {
		ctx = context.WithValue(ctx, methodKey{}, m)
	}
	return p.Handler.TagRPC(ctx, info)
}

func (p *providerRequests) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if end, ok := s.(*stats.End); ok {
		if m, ok := ctx.Value(methodKey{}).(string); ok {
			p.count.Add(ctx, 1, metric.WithAttributes(attribute.String("method", m), attribute.String("code", status.Code(end.Error).String())))
		}
	}
	p.Handler.HandleRPC(ctx, s)
}
