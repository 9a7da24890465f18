package natsserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
)

func TestClusterSharesOneLog(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st := c.Store(0, eventlog.StoreConfig{})
	ctx := context.Background()
	res, err := st.Append(ctx, events.SlotAggregate("node-1"), 0, eventstest.Created("node-1", "c1"))
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	info, err := st.JetStream().Stream(ctx, st.Stream())
	if err != nil {
		t.Fatal(err)
	}
	if ci := info.CachedInfo().Cluster; ci == nil || len(ci.Replicas) != 2 || info.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("stream cluster info %+v, want a leader and 2 replicas", ci)
	}
	for i := range c.Servers {
		other := c.Store(i, eventlog.StoreConfig{})
		eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
			e, err := other.Get(ctx, res.Last)
			if err != nil {
				return err
			}
			return e.Err
		})
	}
}

func TestClusterConfigRefusesUnsafeRoutes(t *testing.T) {
	cases := []struct {
		name string
		c    natsserver.ClusterConfig
		want string
	}{
		{"off loopback without TLS", natsserver.ClusterConfig{Listen: "0.0.0.0:6222", Password: "pw"}, "not on loopback and has no TLS"},
		{"no secret", natsserver.ClusterConfig{Listen: "127.0.0.1:6222"}, "shared route secret"},
		{"TLS without a CA", natsserver.ClusterConfig{Listen: "0.0.0.0:6222", Password: "pw", TLS: natsserver.ClusterTLS{CertFile: "c", KeyFile: "k"}}, "the CA"},
		{"routes without a listener", natsserver.ClusterConfig{Routes: []string{"127.0.0.1:6222"}}, "need a route listen address"},
		{"credentials in a route", natsserver.ClusterConfig{Listen: "127.0.0.1:6222", Password: "pw", Routes: []string{"nats-route://a:b@127.0.0.1:6223"}}, "carries credentials"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		_, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true, Cluster: c.c})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: got %v, want %q", c.name, err, c.want)
		}
		// Refused before the server started: the data dir is free again.
		emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
		if err != nil {
			t.Fatalf("%s: data dir not released: %v", c.name, err)
		}
		emb.Shutdown()
	}
}

func FuzzParseRoute(f *testing.F) {
	for _, s := range []string{"nats-route://127.0.0.1:6222", "host:6222", "nats-route://u:p@h:1", "", "::", "nats-route://[::1]:6222", "http://h:1/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := natsserver.ParseRoute(s)
		if err != nil {
			return
		}
		if u.User != nil || u.Scheme != "nats-route" || u.Port() == "" || u.Hostname() == "" {
			t.Fatalf("ParseRoute(%q) = %v", s, u)
		}
		// What it returns parses again to itself.
		again, err := natsserver.ParseRoute(u.String())
		if err != nil || again.String() != u.String() {
			t.Fatalf("ParseRoute(%q) = %v, again %v, %v", s, u, again, err)
		}
	})
}

// Two of three fresh replicas elect a meta leader, though every replica is
// given the same route list, its own route included (a StatefulSet's
// replicas all get the same list).
func TestTwoOfThreeFreshReplicasFormTheCluster(t *testing.T) {
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	var started []*natsserver.Embedded
	for i := 0; i < 2; i++ {
		emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: t.TempDir(), NoSync: true, ServerName: fmt.Sprintf("replica-%d", i),
			Cluster: natsserver.ClusterConfig{Listen: addrs[i], Routes: addrs, Password: eventstest.ClusterPassword, Size: 3}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(emb.Shutdown)
		started = append(started, emb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, emb := range started {
		if err := emb.WaitForMetaLeader(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if st := emb.ClusterStatus(); !st.Quorum() || st.Reachable != 2 || st.Size != 3 {
			t.Fatalf("status %+v, want a quorum of 2 of 3", st)
		}
	}
}

// Replicas starting together create the same buckets at once: through
// ClusterAdmin every one of them gets its answer, none waits out a timeout.
func TestConcurrentCreatesOnAClusterAllAnswer(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	errs := make(chan error, 3)
	for i := range c.Servers {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			js := natsserver.ClusterAdmin(c.JetStream(i), nil)
			if _, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "snaps", Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
				errs <- fmt.Errorf("replica %d: object store: %w", i, err)
				return
			}
			if _, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "kv", Replicas: 3, Storage: jetstream.FileStorage}); err != nil {
				errs <- fmt.Errorf("replica %d: kv: %w", i, err)
				return
			}
			errs <- nil
		}()
	}
	for range c.Servers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// A replica back from a stop reads the whole log, without a gap, once its
// copy is current: the read of the views at start waits for that.
func TestRestartedReplicaReadsTheWholeLogOnceCurrent(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st := c.Store(0, eventlog.StoreConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c.Stop(2)
	for i := 0; i < 300; i++ {
		slot := fmt.Sprintf("s%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, eventstest.Created(slot, "c")); err != nil {
			t.Fatalf("%v\n%s", err, c.StreamReport("CLAIMSTREAM"))
		}
	}
	c.Start(2)
	back := c.Store(2, eventlog.StoreConfig{})
	if err := back.WaitReplicasCurrent(ctx, nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := back.Read(ctx, 1, 0, func(events.Event) error { n++; return nil }); err != nil {
		t.Fatalf("read through the restarted replica: %v", err)
	}
	if n != 300 {
		t.Fatalf("read %d events, want 300", n)
	}
}

// A single server's log does not depend on the server's name: serve names
// it after the replica (the host name by default), which may change
// between restarts of one data dir when only one replica runs.
func TestSingleServerKeepsItsLogUnderANewName(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	start := func(name string) (*natsserver.Embedded, *eventlog.Store) {
		emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true, ServerName: name})
		if err != nil {
			t.Fatal(err)
		}
		js, err := jetstream.New(emb.Conn)
		if err != nil {
			t.Fatal(err)
		}
		st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return emb, st
	}
	emb, st := start("claimstream-0")
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	emb.Shutdown()
	emb, st = start("some-host")
	defer emb.Shutdown()
	if n, err := st.LastSeq(ctx); err != nil || n != 1 {
		t.Fatalf("LastSeq under a new name = %d, %v; want 1", n, err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 1, eventstest.Booting("a", "a1")); err != nil {
		t.Fatal(err)
	}
}

// A reader asked for right after the stream's followers come back gets
// its consumer. Right after replicas rejoin, with a meta leader known to
// all, a consumer create can go unanswered for good (4 runs in 5 with one
// try of 30s); the store asks again after 5s instead of waiting out the
// caller's deadline.
func TestReadRightAfterTheFollowersComeBack(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	if _, err := c.Store(0, eventlog.StoreConfig{}).Append(context.Background(), events.SlotAggregate("a"), 0, eventstest.Created("a", "c1")); err != nil {
		t.Fatal(err)
	}
	c.WaitStreamStored("CLAIMSTREAM", 1)
	li := c.Index(c.StreamLeader("CLAIMSTREAM"))
	st, err := eventlog.OpenStore(context.Background(), c.JetStream(li), eventlog.StoreConfig{Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	stopped := c.StopOthers(li)
	for _, i := range stopped {
		c.Start(i)
	}
	c.WaitStreamStored("CLAIMSTREAM", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	n := 0
	if err := st.Read(ctx, 1, 0, func(events.Event) error { n++; return nil }); err != nil {
		t.Fatalf("read after %v: %v\n%s", time.Since(start), err, c.StreamReport("CLAIMSTREAM"))
	}
	if n != 1 {
		t.Fatalf("read %d events, want 1", n)
	}
}

// The claimstream leader's server hands the stream's leadership to
// another replica; a server that does not lead it moves nothing.
func TestHandOffStreamLeaders(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	c.Store(0, eventlog.StoreConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lead := c.StreamLeader("CLAIMSTREAM")
	other := c.Servers[(c.Index(lead)+1)%3]
	if moved, err := other.HandOffStreamLeaders(ctx, clock.RealClock{}, "CLAIMSTREAM"); err != nil || len(moved) != 0 {
		t.Fatalf("a follower's hand-off moved %v (%v), want nothing", moved, err)
	}
	// Once its replicas are current (a new stream's may not be yet).
	eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		moved, err := lead.HandOffStreamLeaders(ctx, clock.RealClock{}, "CLAIMSTREAM")
		if err != nil || len(moved) != 1 {
			return fmt.Errorf("the leader's hand-off moved %v (%v), want CLAIMSTREAM", moved, err)
		}
		return nil
	})
	eventstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		if now := c.StreamLeader("CLAIMSTREAM"); now == lead {
			return fmt.Errorf("the stream is still led by %s", now.Server.Name())
		}
		return nil
	})
}

// With a replica down the leadership stays: losing the leader's server
// would cost the quorum wherever the stream's leader is, and a move makes
// the next write wait for an election on the only other replica.
func TestHandOffStreamLeadersStaysWithAReplicaDown(t *testing.T) {
	c := eventstest.StartCluster(t, 3)
	st := c.Store(0, eventlog.StoreConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("s"), 0, eventstest.Created("s", "c-1")); err != nil {
		t.Fatal(err)
	}
	lead := c.StreamLeader("CLAIMSTREAM")
	down := 1 // neither the leader nor server 0, which the store talks through
	for down == c.Index(lead) || down == 0 {
		down++
	}
	c.Stop(down)
	if _, err := st.Append(ctx, events.SlotAggregate("s"), 1, eventstest.Created("s", "c-2")); err != nil {
		t.Fatal(err)
	}
	if l := c.StreamLeader("CLAIMSTREAM"); l != lead {
		t.Fatalf("stream led by %s, not %s", l.Name, lead.Name)
	}
	// Once the leader sees it gone (offline, or silent for 2s).
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		acc, err := lead.Server.JszAccount(&server.JSzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Streams: true})
		if err != nil {
			return err
		}
		for _, sd := range acc.Streams {
			if sd.Name != "CLAIMSTREAM" || sd.Cluster == nil {
				continue
			}
			for _, r := range sd.Cluster.Replicas {
				if r.Name == c.Servers[down].Name && (r.Offline || r.Active > 2*time.Second) {
					return nil
				}
			}
		}
		return fmt.Errorf("%s still seen up by the stream's leader", c.Servers[down].Name)
	})
	moved, err := lead.HandOffStreamLeaders(ctx, clock.RealClock{}, "CLAIMSTREAM")
	if err != nil || len(moved) != 0 {
		t.Fatalf("with %s down the hand-off moved %v (%v), want nothing", c.Servers[down].Name, moved, err)
	}
	if l := c.StreamLeader("CLAIMSTREAM"); l != lead {
		t.Fatalf("the stream moved to %s", l.Name)
	}
}
