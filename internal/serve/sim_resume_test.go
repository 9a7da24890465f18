package serve

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/sim"
)

// TestSimulatorRestartResumesFromTheLogsTime: a sped-up simulation wrote
// events ahead of the wall clock; after a restart on the same data dir the
// simulated clock starts at the log's last event, not at the wall clock
// behind it (where every age would read negative).
func TestSimulatorRestartResumesFromTheLogsTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ahead := time.Now().Add(5 * time.Hour).UTC().Truncate(time.Second)
	p, err := startPlane(ctx, serveOptions{dataDir: dir, stream: "CLAIMSTREAM", noFsync: true}, quiet, clocktesting.NewFakeClock(ahead), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.store.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: ahead, Data: events.GroupDeclared{
		Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler},
	}}); err != nil {
		t.Fatal(err)
	}
	p.emb.Shutdown()

	clk := sim.NewScaledClock(20)
	p2, err := startPlane(ctx, serveOptions{dataDir: dir, stream: "CLAIMSTREAM", noFsync: true}, quiet, clk, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p2.emb.Shutdown)
	if now := clk.Now(); now.Before(ahead) {
		t.Fatalf("the restarted simulation's clock reads %s, behind the log's last event at %s", now, ahead)
	}
}
