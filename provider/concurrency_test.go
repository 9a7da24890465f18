package provider

import (
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// 100 concurrent IncreaseSize(1) over gRPC on a 10-slot group: exactly 10
// succeed, the other 90 are refused FailedPrecondition, and the views hold
// exactly 10 claims, one per slot.
func TestConcurrentIncreaseSize(t *testing.T) {
	e := newEnv(t, Options{})
	e.h.Declare("workers", events.GroupSpec{}, handlerstest.Slots("w", 10)...)

	var wg sync.WaitGroup
	var mu sync.Mutex
	byCode := map[codes.Code]int{}
	for range 100 {
		wg.Go(func() {
			_, err := e.c.NodeGroupIncreaseSize(e.ctx(), &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1})
			mu.Lock()
			byCode[status.Code(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if byCode[codes.OK] != 10 || byCode[codes.FailedPrecondition] != 90 {
		t.Fatalf("results by code = %v, want 10 OK and 90 FailedPrecondition", byCode)
	}
	if got := targetSize(t, e, "workers"); got != 10 {
		t.Fatalf("target = %d, want 10", got)
	}
	e.h.Read(func(s *projections.State) {
		claims := 0
		for _, c := range s.Claims {
			if c.Group == "workers" {
				claims++
			}
		}
		if claims != 10 {
			t.Errorf("%d claims in the views, want 10", claims)
		}
		for _, slot := range s.Groups["workers"].Slots {
			if n := len(s.LiveClaimsOfSlot(slot)); n != 1 {
				t.Errorf("slot %s has %d live claims", slot, n)
			}
		}
	})
}
