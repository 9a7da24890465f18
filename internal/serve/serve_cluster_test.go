package serve

import (
	"context"
	"fmt"
	"github.com/nats-io/nats-server/v2/server"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
)

func TestServeRefusesBadClusterFlags(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "route-secret")
	writeFile(t, pw, "s3cret\n")
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n")
	three := func(c natsClusterOptions) natsClusterOptions {
		c.replicas = 3
		if c.replicaName == "" {
			c.replicaName = "claimstream-0"
		}
		return c
	}
	routes := []string{"nats-route://127.0.0.1:6222", "127.0.0.1:6223", "127.0.0.1:6224"}
	cases := []struct {
		name string
		c    natsClusterOptions
		want []string
	}{
		{"two replicas", natsClusterOptions{replicas: 2}, []string{"--replicas 2", "1 replica or 3"}},
		{"five replicas", natsClusterOptions{replicas: 5}, []string{"--replicas 5"}},
		{"routes with one replica", natsClusterOptions{replicas: 1, routes: routes}, []string{"--nats-routes needs --replicas 3"}},
		{"three without routes", three(natsClusterOptions{clusterListen: "127.0.0.1:6222"}), []string{"--nats-routes"}},
		{"three without a secret", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: routes}), []string{"--nats-cluster-password-file"}},
		{"an empty secret", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: routes, passwordFile: empty}), []string{"--nats-cluster-password-file", "is empty"}},
		{"a missing secret", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: routes, passwordFile: filepath.Join(dir, "nope")}), []string{"--nats-cluster-password-file", "no such file"}},
		{"off loopback without TLS", three(natsClusterOptions{clusterListen: "0.0.0.0:6222", routes: routes, passwordFile: pw}), []string{"--nats-cluster-listen 0.0.0.0:6222 is not a loopback address", "--nats-cluster-tls-cert"}},
		{"a certificate without a CA", three(natsClusterOptions{clusterListen: "0.0.0.0:6222", routes: routes, passwordFile: pw, clusterTLSCert: pw, clusterTLSKey: pw}), []string{"go together"}},
		{"credentials in a route", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: []string{"nats-route://u:p@127.0.0.1:6223"}, passwordFile: pw}), []string{"--nats-routes", "carries credentials"}},
		{"a route without a port", three(natsClusterOptions{clusterListen: "127.0.0.1:6222", routes: []string{"peer-1"}, passwordFile: pw}), []string{"--nats-routes", "host:port"}},
		{"a bad replica name", three(natsClusterOptions{replicaName: "a b", clusterListen: "127.0.0.1:6222", routes: routes, passwordFile: pw}), []string{"--replica-name"}},
	}
	for _, c := range cases {
		o := natsServeOptions(t, natsOptions{natsClusterOptions: c.c})
		err := runServe(context.Background(), o)
		if err == nil {
			t.Fatalf("%s: serve started", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: error %q does not say %q", c.name, err, w)
			}
		}
		if ents, _ := os.ReadDir(o.dataDir); len(ents) > 0 {
			t.Fatalf("%s: the data dir was written", c.name)
		}
	}
}

// The leader election reads the replica's name from the options.
func TestReplicaNameDefaultsToPodName(t *testing.T) {
	t.Setenv("POD_NAME", "claimstream-2")
	o := serveOptions{}
	if got := o.nats.ReplicaName(); got != "claimstream-2" {
		t.Fatalf("replica name %q, want the pod name", got)
	}
	o.nats.replicaName = "r-1"
	if got := o.nats.ReplicaName(); got != "r-1" {
		t.Fatalf("replica name %q, want the flag's", got)
	}
	if o.nats.Replicas() != 1 {
		t.Fatalf("replicas of options without flags = %d, want 1", o.nats.Replicas())
	}
}

// writeBackupOf writes a backup of a single server's log of n slots and
// returns its file and last sequence.
func writeBackupOf(t *testing.T, n int) (string, uint64) {
	t.Helper()
	st, srv := eventstest.NewStore(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	if _, err := st.Append(ctx, events.GroupAggregate("g"), 0, events.Event{Time: t0, Data: events.GroupDeclared{Ref: events.Ref{Group: "g", Cause: "test"}, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: t0, Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "backup")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	digestAt := func(ctx context.Context, seq uint64) (string, error) {
		views, err := projections.Rebuild(ctx, st, seq)
		if err != nil {
			return "", err
		}
		return projections.ViewsDigest(views)
	}
	m, err := eventlog.WriteBackup(ctx, srv.Conn, st.Stream(), f, digestAt, nil)
	if err != nil {
		t.Fatal(err)
	}
	return path, m.LastSeq
}

// A single replica's log moves to three: every replica is given the backup;
// the first restores it through the cluster, the others find it there, the
// stream is raised to three replicas, and every replica's views hold it.
// Started again with the flag, nothing is restored twice.
func TestReplicasRestoreASingleReplicasBackup(t *testing.T) {
	backup, last := writeBackupOf(t, 5)
	secret := filepath.Join(t.TempDir(), "route-secret")
	writeFile(t, secret, "s3cret\n")
	routes := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	opts := make([]serveOptions, 3)
	for i := range opts {
		opts[i] = natsServeOptions(t, natsOptions{natsClusterOptions: natsClusterOptions{
			replicaName: fmt.Sprintf("claimstream-%d", i), replicas: 3,
			clusterListen: routes[i], routes: routes, passwordFile: secret,
			restoreBackup: backup,
		}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	startAll := func() []*plane {
		type started struct {
			i   int
			p   *plane
			err error
		}
		done := make(chan started, len(opts))
		for i := range opts {
			go func() {
				log, _ := newLogger(first(os.Getenv("TEST_LOG_LEVEL"), "warn"), "text")
				p, err := startPlane(ctx, opts[i], log, nil, nil)
				done <- started{i, p, err}
			}()
		}
		planes := make([]*plane, len(opts))
		var failed error
		// A start that takes long is shown while it waits: what the
		// servers that started know of the streams then.
		slow := time.NewTimer(30 * time.Second)
		defer slow.Stop()
		for range opts {
			for waiting := true; waiting; {
				select {
				case s := <-done:
					planes[s.i], waiting = s.p, false
					if s.err != nil && failed == nil {
						failed = s.err
					}
				case <-slow.C:
					t.Log("a replica's start takes over 30s; the streams as the started ones see them:")
					logStreamsOf(t, planes)
				}
			}
		}
		if failed != nil {
			logStreamsOf(t, planes)
			t.Fatal(failed)
		}
		return planes
	}
	stopAll := func(planes []*plane) {
		for _, p := range planes {
			if p != nil {
				p.emb.Shutdown()
			}
		}
	}
	planes := startAll()
	t.Cleanup(func() { stopAll(planes) })
	for i, p := range planes {
		if n, err := p.store.LastSeq(ctx); err != nil || n != last {
			t.Fatalf("replica %d: LastSeq %d, %v; the backup ends at %d", i, n, err, last)
		}
		if p.views.Seq() != last {
			t.Fatalf("replica %d: views at %d, want %d", i, p.views.Seq(), last)
		}
	}
	info, err := planes[0].store.JetStream().Stream(ctx, "CLAIMSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	if r := info.CachedInfo().Config.Replicas; r != 3 {
		t.Fatalf("stream replicas %d after the restore, want 3", r)
	}
	// A write lands after the restore, and a restart with the flag still
	// given restores nothing again.
	if _, err := planes[1].store.Append(ctx, events.SlotAggregate("s0"), 2, events.Event{Time: time.Now(), Data: events.SlotDecommissioned{Ref: events.Ref{Slot: "s0", Group: "g", Cause: "test"}, By: "test"}}); err != nil {
		t.Fatalf("append after the restore: %v", err)
	}
	stopAll(planes)
	planes = startAll()
	for i, p := range planes {
		if n, err := p.store.LastSeq(ctx); err != nil || n != last+1 {
			t.Fatalf("replica %d after a restart: LastSeq %d, %v; want %d", i, n, err, last+1)
		}
	}
}

// logStreamsOf logs what the servers of the planes that started know of
// the streams: their leaders and replicas, for a start that failed.
func logStreamsOf(t *testing.T, planes []*plane) {
	t.Helper()
	for i, p := range planes {
		if p == nil || p.emb == nil {
			t.Logf("replica %d: did not start", i)
			continue
		}
		if jsz, err := p.emb.Server.Jsz(&server.JSzOptions{}); err == nil && jsz.Meta != nil {
			t.Logf("replica %d (%s): meta leader %q, %d peers", i, p.emb.Server.Name(), jsz.Meta.Leader, len(jsz.Meta.Replicas)+1)
		}
		acc, err := p.emb.Server.JszAccount(&server.JSzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Streams: true, Consumer: true})
		if err != nil {
			t.Logf("replica %d: %v", i, err)
			continue
		}
		for _, sd := range acc.Streams {
			line := fmt.Sprintf("replica %d: stream %s msgs %d last %d", i, sd.Name, sd.State.Msgs, sd.State.LastSeq)
			if c := sd.Cluster; c != nil {
				line += fmt.Sprintf(" leader %q", c.Leader)
				for _, r := range c.Replicas {
					line += fmt.Sprintf(" [%s current=%v offline=%v active=%v lag=%d]", r.Name, r.Current, r.Offline, r.Active, r.Lag)
				}
			}
			line += fmt.Sprintf(" consumers %d", len(sd.Consumer))
			t.Log(line)
		}
	}
}

// A backup is restored only into an empty log: a log that exists with
// fewer events than the backup is refused, and keeps its events.
func TestRestoreBackupRefusesALogWithOtherEvents(t *testing.T) {
	backup, _ := writeBackupOf(t, 5)
	o := natsServeOptions(t, natsOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := startTestPlane(t, ctx, o)
	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("x%d", i)
		if _, err := p.store.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: time.Now(), Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}}); err != nil {
			t.Fatal(err)
		}
	}
	p.emb.Shutdown()
	o.nats.restoreBackup = backup
	log, _ := newLogger("warn", "text")
	_, err := startPlane(ctx, o, log, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "restored only into an empty log") {
		t.Fatalf("got %v, want a refusal", err)
	}
	o.nats.restoreBackup = ""
	p = startTestPlane(t, ctx, o)
	if n, err := p.store.LastSeq(ctx); err != nil || n != 2 {
		t.Fatalf("the refused restore changed the log: LastSeq %d, %v", n, err)
	}
}
