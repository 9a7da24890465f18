package natsserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// One replica to three. A single server's data dir is not adopted by a
// cluster (its R1 stream is not in the cluster's metadata), so the log
// moves as a backup: restored through the cluster's JetStream API it
// comes back R1, and opening the store with Replicas 3 scales it up; then
// every replica holds every event.
func TestSingleServerLogMovesToThreeReplicas(t *testing.T) {
	single := eventstest.StartServer(t)
	st := single.Store()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for i := 0; i < 5; i++ {
		slot := fmt.Sprintf("s%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, eventstest.Created(slot, "c")); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "backup")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	digest := func(context.Context, uint64) (string, error) { return fmt.Sprintf("%064x", 0), nil }
	if _, err := eventlog.WriteBackup(ctx, single.Conn, st.Stream(), f, digest, nil); err != nil {
		t.Fatal(err)
	}
	f.Close()
	single.Stop()

	c := eventstest.StartCluster(t, 3)
	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := eventlog.VerifyBackup(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := eventlog.RestoreBackup(ctx, c.Servers[0].Conn, f, m); err != nil {
		t.Fatalf("restore onto the cluster: %v", err)
	}
	st3 := c.Store(0, eventlog.StoreConfig{Replicas: 3})
	info, err := st3.JetStream().Stream(ctx, st3.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if got := info.CachedInfo().Config.Replicas; got != 3 {
		t.Fatalf("stream replicas %d, want 3", got)
	}
	// Scaled up: the first replica may stop, the other two hold the log.
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		info, err := st3.JetStream().Stream(ctx, st3.Stream())
		if err != nil {
			return err
		}
		ci := info.CachedInfo().Cluster
		if ci == nil || len(ci.Replicas) != 2 {
			return fmt.Errorf("cluster info %+v", ci)
		}
		for _, r := range ci.Replicas {
			if !r.Current {
				return fmt.Errorf("replica %s not current", r.Name)
			}
		}
		return nil
	})
	c.Stop(0)
	c.WaitForMetaLeader()
	st1 := c.Store(1, eventlog.StoreConfig{Replicas: 3})
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		n, err := st1.LastSeq(ctx)
		if err != nil {
			return err
		}
		if n != 5 {
			return fmt.Errorf("LastSeq without the first replica = %d", n)
		}
		return nil
	})
	if got := len(eventstest.ReadAll(t, st1)); got != 5 {
		t.Fatalf("the other replicas read %d events, want 5", got)
	}
}
