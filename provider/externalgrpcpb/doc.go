// Package externalgrpcpb is the Go code generated from
// schemas/externalgrpc.proto: cluster-autoscaler's externalgrpc protocol in a
// layout that serves CA <= 1.34 and CA >= 1.35 at once (see the proto).
// Regenerate with the command in tools/README.md; do not edit *.pb.go.
package externalgrpcpb
