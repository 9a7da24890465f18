package provider

import (
	"fmt"
	"testing"
)

// BenchmarkReadsLoopbackScale: cluster-autoscaler's three reads over a
// loopback TCP gRPC connection at 1,000 and 10,000 slots in 100 groups
// (half of each group claimed), in the same run, so NodeGroups (the whole
// pool in one answer) is set against TargetSize (one group).
//
//	go test ./provider -run '^$' -bench ReadsLoopbackScale -benchtime 2s -count 3
func BenchmarkReadsLoopbackScale(b *testing.B) {
	for _, perGroup := range []int{10, 100} {
		b.Run(fmt.Sprintf("slots=%d", perGroup*benchGroups), func(b *testing.B) { benchReadsLoopback(b, perGroup) })
	}
}
