package natsserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/internal/freeport"
)

// subscriberCluster starts three replicas whose client ports take the
// read-only identity, its consumers limited to consumers (0: the default).
func subscriberCluster(t *testing.T, consumers int) *eventstest.Cluster {
	t.Helper()
	return eventstest.StartClusterWith(t, 3, eventstest.ClusterOptions{
		Listen: true,
		Access: natsserver.Access{
			Subscribers:         []natsserver.Subscriber{{User: readerUser, Password: readerPassword}},
			Streams:             []string{"CLAIMSTREAM", deadLetters},
			SubscriberConsumers: consumers,
		},
	})
}

// ensureCopies makes the subscribers' copies as the process's keeper does
// (SubscriberCopies.Run ensures them again until they are in place): on a
// cluster that just formed, the meta leader places no stream until it has
// heard from every peer.
func ensureCopies(t *testing.T, copies *natsserver.SubscriberCopies) {
	t.Helper()
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := copies.Ensure(ctx)
		return err
	})
}

// The read-only identity holds on every replica: a subscriber connected to
// a server that does not lead the stream reads and consumes the log, and is
// refused writes and stream administration.
func TestSubscriberOnFollowerReadsButCannotWrite(t *testing.T) {
	c := subscriberCluster(t, 0)
	st := c.Store(0, eventlog.StoreConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	// Any replica keeps the copies; the subscriber reads one on another.
	copies, err := c.Servers[0].SubscriberCopies(nil)
	if err != nil || copies == nil {
		t.Fatalf("subscribers' copies: %v", err)
	}
	ensureCopies(t, copies)
	follower := c.Servers[c.Follower("CLAIMSTREAM")]
	nc, js, v := connectReader(t, follower.Embedded)
	copied(t, js, "CLAIMSTREAM", 1)

	cons, err := js.CreateConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{
		Durable: "pager", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		t.Fatalf("create a consumer on a follower: %v", err)
	}
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 1, eventstest.Booting("a", "a1")); err != nil {
		t.Fatal(err)
	}
	var got []string
	eventstest.CheckFor(t, 20*time.Second, 10*time.Millisecond, func() error {
		batch, err := cons.Fetch(2, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return err
		}
		for m := range batch.Messages() {
			got = append(got, m.Subject())
			if err := m.DoubleAck(ctx); err != nil {
				return err
			}
		}
		if len(got) < 2 {
			return fmt.Errorf("fetched %v so far", got)
		}
		return nil
	})
	if got[0] != "cs.slot.a.ClaimCreated" || got[1] != "cs.slot.a.ClaimBooting" {
		t.Fatalf("consumed %v", got)
	}
	s, err := js.Stream(ctx, "CLAIMSTREAM")
	if err != nil {
		t.Fatalf("stream info on a follower: %v", err)
	}
	// A get is answered by whichever replica serves it; right after the
	// appends, under -race, none had its responder known to this server
	// yet ("no responders"). A refused read would never succeed.
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		if _, err := s.GetMsg(ctx, 1); err != nil {
			return fmt.Errorf("get on a follower: %w", err)
		}
		return nil
	})

	try := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		if err := f(ctx); err == nil {
			t.Fatalf("%s: the reader was allowed", what)
		}
	}
	try("publish an event", func(ctx context.Context) error {
		_, err := js.Publish(ctx, "cs.slot.a.ClaimReady", []byte(`{}`))
		return err
	})
	v.saw(t, "cs.slot.a.ClaimReady")
	try("delete the stream", func(ctx context.Context) error { return js.DeleteStream(ctx, "CLAIMSTREAM") })
	v.saw(t, "$JS.API.STREAM.DELETE.CLAIMSTREAM")
	try("update the stream", func(ctx context.Context) error {
		_, err := js.UpdateStream(ctx, jetstream.StreamConfig{Name: "CLAIMSTREAM", Subjects: []string{"cs.>"}, Replicas: 1})
		return err
	})
	v.saw(t, "$JS.API.STREAM.UPDATE.CLAIMSTREAM")
	try("step the stream leader down", func(ctx context.Context) error {
		_, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN.CLAIMSTREAM", nil)
		return err
	})
	v.saw(t, "$JS.API.STREAM.LEADER.STEPDOWN.CLAIMSTREAM")
	if n := len(eventstest.ReadAll(t, st)); n != 2 {
		t.Fatalf("log holds %d events, want 2", n)
	}
	// An anonymous client is refused on the follower too.
	if nc2, err := nats.Connect(follower.ClientURL(), nats.NoReconnect()); err == nil {
		nc2.Close()
		t.Fatal("an anonymous client connected to a follower")
	}
}

// Route TLS: replicas with certificates of one CA form a cluster; a server
// whose route certificate is of another CA is not let in, even with the
// right secret.
func TestClusterRoutesOverTLS(t *testing.T) {
	ca, caKey, caFile := writeTestCA(t)
	certs := make([][2]string, 3)
	for i := range certs {
		certs[i][0], certs[i][1] = writeTestLeaf(t, ca, caKey)
	}
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	routes := []string{addrs[0], addrs[1], addrs[2]}
	start := func(i int, cert, key, caFile string) *natsserver.Embedded {
		t.Helper()
		emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{
			Dir: t.TempDir(), NoSync: true, ServerName: "tls-" + string(rune('a'+i)),
			Cluster: natsserver.ClusterConfig{Listen: addrs[i], Routes: routes, Password: eventstest.ClusterPassword, Size: 3,
				TLS: natsserver.ClusterTLS{CertFile: cert, KeyFile: key, CAFile: caFile}},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(emb.Shutdown)
		return emb
	}
	a := start(0, certs[0][0], certs[0][1], caFile)
	b := start(1, certs[1][0], certs[1][1], caFile)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.WaitForMetaLeader(ctx, nil); err != nil {
		t.Fatalf("two TLS replicas: %v", err)
	}
	if err := b.WaitForMetaLeader(ctx, nil); err != nil {
		t.Fatalf("two TLS replicas: %v", err)
	}
	// A stranger: its own CA, so neither side trusts the other. Until it
	// starts, a and b fail no handshake (they trust each other, and
	// nothing listens at the stranger's address).
	refusedA, refusedB := &handshakeErrors{}, &handshakeErrors{}
	a.Server.SetLogger(refusedA, false, false)
	b.Server.SetLogger(refusedB, false, false)
	sCA, sKey, sCAFile := writeTestCA(t)
	sCert, sKeyFile := writeTestLeaf(t, sCA, sKey)
	stranger := start(2, sCert, sKeyFile, sCAFile)
	// It stays out: once a route handshake between it and each replica
	// has failed, none of the three counts it.
	eventstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		if refusedA.n.Load() == 0 || refusedB.n.Load() == 0 {
			return fmt.Errorf("no failed route handshake with the stranger yet: %d on a, %d on b", refusedA.n.Load(), refusedB.n.Load())
		}
		return nil
	})
	if st := stranger.ClusterStatus(); st.Reachable > 1 {
		t.Fatalf("a server with a foreign certificate joined: %+v", st)
	}
	for _, r := range []*natsserver.Embedded{a, b} {
		if st := r.ClusterStatus(); st.Reachable > 2 {
			t.Fatalf("a server with a foreign certificate was let in: %+v", st)
		}
	}
}

// handshakeErrors is a nats-server logger that counts failed TLS route
// handshakes.
type handshakeErrors struct{ n atomic.Int32 }

func (h *handshakeErrors) Errorf(format string, v ...any) {
	if strings.Contains(fmt.Sprintf(format, v...), "TLS route handshake error") {
		h.n.Add(1)
	}
}
func (h *handshakeErrors) Noticef(string, ...any) {}
func (h *handshakeErrors) Warnf(string, ...any)   {}
func (h *handshakeErrors) Fatalf(string, ...any)  {}
func (h *handshakeErrors) Debugf(string, ...any)  {}
func (h *handshakeErrors) Tracef(string, ...any)  {}

// freeAddr is a free port below the ephemeral range (internal/freeport).
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func writeTestCA(t *testing.T) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "test route CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.crt")
	writePEM(t, path, "CERTIFICATE", der)
	return cert, key, path
}

func writeTestLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "replica"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// On three replicas too, the subscribers' consumers count against their
// own account's limit, wherever they connect, and the process's readers
// start on every replica while the subscribers hold all they may.
func TestSubscriberConsumerFloodOnAClusterLeavesTheReplicasReading(t *testing.T) {
	c := subscriberCluster(t, 4)
	st := c.Store(0, eventlog.StoreConfig{ReaderName: "claimstream-0"})
	// The budget of the whole flood: a dozen consumer creates on a cluster
	// of three, each a meta-leader proposal, slow under the race detector.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := st.Append(ctx, events.SlotAggregate("a"), 0, eventstest.Created("a", "a1")); err != nil {
		t.Fatal(err)
	}
	copies, err := c.Servers[1].SubscriberCopies(nil)
	if err != nil || copies == nil {
		t.Fatalf("subscribers' copies: %v", err)
	}
	ensureCopies(t, copies)
	made := 0
	for i, srv := range c.Servers {
		_, js, _ := connectReader(t, srv.Embedded)
		copied(t, js, "CLAIMSTREAM", 1)
		for j := range 3 {
			name := fmt.Sprintf("flood-%d-%d", i, j)
			eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
				// Each attempt within the wait: a create the cluster leaves
				// unanswered is asked again (the same durable: a create that
				// landed unanswered is found, not made twice).
				actx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				_, err := js.CreateConsumer(actx, "CLAIMSTREAM", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy})
				switch {
				case err == nil:
					made++
					return nil
				case strings.Contains(err.Error(), "maximum consumers"):
					return nil // refused: the limit holds
				}
				return err // not answered yet by a replica that just joined the copy
			})
		}
	}
	if made != 4 {
		t.Fatalf("the subscribers made %d durables across the replicas, limit 4", made)
	}
	for i := range c.Servers {
		rs := c.Store(i, eventlog.StoreConfig{ReaderName: fmt.Sprint("claimstream-", i)})
		n := 0
		eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
			n = 0
			return rs.Read(ctx, 1, 0, func(events.Event) error { n++; return nil })
		})
		if n != 1 {
			t.Fatalf("replica %d read %d events during the flood, want 1", i, n)
		}
	}
}

// On three replicas, with the copies and their consumers replicated: push
// consumers of a subscriber on a follower aimed at the imports of both
// copies deliver nothing into the process's account on any replica, and
// once the replicas watch, every push consumer outside the subscriber's
// inboxes is removed within a bound, by one replica each.
func TestSubscriberPushConsumersOnThreeReplicas(t *testing.T) {
	c := subscriberCluster(t, 0)
	st := c.Store(0, eventlog.StoreConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if _, err := c.JetStream(0).CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: deadLetters, Subjects: []string{"csdl.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	logAndDeadLetters(ctx, t, st, "s", 100, 20)
	copies := make([]*natsserver.SubscriberCopies, len(c.Servers))
	var seen []*strays
	for i, s := range c.Servers {
		var err error
		if copies[i], err = s.SubscriberCopies(nil); err != nil || copies[i] == nil {
			t.Fatalf("subscribers' copies: %v", err)
		}
		seen = append(seen, watchStrays(t, s.Conn))
	}
	ensureCopies(t, copies[0])
	follower := c.Servers[c.Follower("CLAIMSTREAM")]
	nc, js, _ := connectReader(t, follower.Embedded)
	copied(t, js, "CLAIMSTREAM", 100)
	copied(t, js, deadLetters, 20)

	stop := processReading(ctx, st)
	made := flood(ctx, t, js, append([]string{"elsewhere"}, importTargets...), 3)
	logAndDeadLetters(ctx, t, st, "t", 10, 1)
	copied(t, js, "CLAIMSTREAM", 110)
	copied(t, js, deadLetters, 21)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for i, s := range seen {
		if got, where := s.total(); got != 0 {
			t.Fatalf("%d deliveries of the subscriber's push consumers reached the process's account on replica %d: %s", got, i, where)
		}
	}
	aimed := len(made["CLAIMSTREAM"]) + len(made[deadLetters])
	if aimed < 2*3 {
		t.Fatalf("the server took %d of the push consumers, want at least the %d outside its reserved subjects", aimed, 2*3)
	}

	for _, cp := range copies {
		keep(t, cp)
	}
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		push, err := pushConsumers(ctx, js)
		if err != nil || len(push) != 0 {
			return fmt.Errorf("push consumers on the copies: %v (%v)", push, err)
		}
		removed := uint64(0)
		for _, cp := range copies {
			removed += cp.ConsumersRemoved()
		}
		if removed != uint64(aimed) {
			return fmt.Errorf("%d removals counted on the replicas, want %d", removed, aimed)
		}
		return nil
	})
	// Made while they watch: one replica removes it.
	if _, err := js.CreatePushConsumer(ctx, deadLetters, jetstream.ConsumerConfig{
		DeliverSubject: "elsewhere.watched", AckPolicy: jetstream.AckNonePolicy,
	}); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		push, err := pushConsumers(ctx, js)
		if err != nil || len(push) != 0 {
			return fmt.Errorf("push consumers on the copies: %v (%v)", push, err)
		}
		removed := uint64(0)
		for _, cp := range copies {
			removed += cp.ConsumersRemoved()
		}
		if removed != uint64(aimed)+1 {
			return fmt.Errorf("%d removals counted on the replicas, want %d", removed, aimed+1)
		}
		return nil
	})
}
