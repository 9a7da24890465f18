// Package ca134 holds a test copy of cluster-autoscaler's externalgrpc
// messages in the layout of CA <= 1.34, for wire tests against our server.
package ca134

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// upstreamService is the real service path. The generated client of this
// package would call /ca134.externalgrpc.CloudProvider/..., which our server
// does not serve.
const upstreamService = "/clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider/"

// Invoke calls method (e.g. "NodeGroupGetOptions") on cc as a real CA of this
// layout would. It rejects unknown methods and wrong message types up front:
// a typo would otherwise come back as codes.Unimplemented, which for the
// optional RPCs looks like a valid answer.
func Invoke(ctx context.Context, cc grpc.ClientConnInterface, method string, in, out proto.Message) error {
	m := File_ca134_ca134_proto.Services().ByName("CloudProvider").Methods().ByName(protoreflect.Name(method))
	if m == nil {
		return fmt.Errorf("ca134: no method %q in CloudProvider", method)
	}
	if got, want := in.ProtoReflect().Descriptor(), m.Input(); got != want {
		return fmt.Errorf("ca134: %s takes %s, not %s", method, want.FullName(), got.FullName())
	}
	if got, want := out.ProtoReflect().Descriptor(), m.Output(); got != want {
		return fmt.Errorf("ca134: %s returns %s, not %s", method, want.FullName(), got.FullName())
	}
	return cc.Invoke(ctx, upstreamService+method, in, out)
}
