package serve

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
)

func natsServeOptions(t *testing.T, n natsOptions) serveOptions {
	t.Helper()
	return serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn", nats: n}
}

func TestServeRefusesBadNATSFlags(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	writeFile(t, empty, "\n")
	cases := []struct {
		name string
		n    natsOptions
		want []string
	}{
		{"all interfaces without TLS", natsOptions{listen: "0.0.0.0:4222"}, []string{"--nats-listen 0.0.0.0:4222 is not a loopback address", "--nats-tls-cert"}},
		{"empty host without TLS", natsOptions{listen: ":4222"}, []string{"not a loopback address"}},
		{"a host name without TLS", natsOptions{listen: "claimstream.example:4222"}, []string{"not a loopback address"}},
		{"a missing password file", natsOptions{listen: "127.0.0.1:0", subscriberPasswordFN: filepath.Join(dir, "nope")}, []string{"--nats-subscriber-password-file", "no such file"}},
		{"an empty password file", natsOptions{listen: "127.0.0.1:0", subscriberPasswordFN: empty}, []string{"--nats-subscriber-password-file", "is empty"}},
		{"a missing certificate", natsOptions{listen: "0.0.0.0:0", tlsCert: filepath.Join(dir, "tls.crt"), tlsKey: filepath.Join(dir, "tls.key")}, []string{"--nats-tls-cert", "no such file"}},
		{"a key without a certificate", natsOptions{listen: "127.0.0.1:0", tlsKey: empty}, []string{"--nats-tls-cert and --nats-tls-key go together"}},
		{"a password without a port", natsOptions{subscriberPasswordFN: empty}, []string{"--nats-subscriber-password-file needs --nats-listen"}},
		{"a bad port", natsOptions{listen: "127.0.0.1:http"}, []string{"--nats-listen", "bad port"}},
	}
	for _, c := range cases {
		o := natsServeOptions(t, c.n)
		err := runServe(context.Background(), o)
		if err == nil {
			t.Fatalf("%s: serve started", c.name)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("%s: error %q does not say %q", c.name, err, w)
			}
		}
		// Refused before anything was written.
		if ents, _ := os.ReadDir(o.dataDir); len(ents) > 0 {
			t.Fatalf("%s: the data dir was written", c.name)
		}
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths and a pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	certFile, keyFile, cert, _ := writeCert(t, nil, nil, x509.ExtKeyUsageServerAuth)
	roots = x509.NewCertPool()
	roots.AddCert(cert)
	return certFile, keyFile, roots
}

// writeCert writes a certificate for 127.0.0.1 and its key: self-signed
// (and a CA) when parent is nil, else signed by parent.
func writeCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, usage x509.ExtKeyUsage) (certFile, keyFile string, cert *x509.Certificate, key *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "claimstream-nats"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})))
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, cert, key
}

// With --nats-tls-client-ca a subscriber needs a client certificate of that
// CA as well as its password.
func TestServeNATSPortWithMutualTLS(t *testing.T) {
	caFile, _, ca, caKey := writeCert(t, nil, nil, x509.ExtKeyUsageServerAuth)
	certFile, keyFile, _, _ := writeCert(t, ca, caKey, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey, _, _ := writeCert(t, ca, caKey, x509.ExtKeyUsageClientAuth)
	_, _, stranger, strangerKey := writeCert(t, nil, nil, x509.ExtKeyUsageServerAuth)
	strangerCert, strangerKeyFile, _, _ := writeCert(t, stranger, strangerKey, x509.ExtKeyUsageClientAuth)
	pwFile := filepath.Join(t.TempDir(), "password")
	writeFile(t, pwFile, "pw")
	addr := freeAddr(t)
	o := natsServeOptions(t, natsOptions{listen: addr, subscriberUser: "subscriber", subscriberPasswordFN: pwFile, tlsCert: certFile, tlsKey: keyFile, tlsClientCA: caFile})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startTestPlane(t, ctx, o)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	connect := func(cert, key string) error {
		opts := []nats.Option{nats.UserInfo("subscriber", "pw"), nats.NoReconnect(), nats.Timeout(2 * time.Second)}
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		nc, err := nats.Connect("tls://"+addr, append(opts, nats.Secure(tc))...)
		if err == nil {
			nc.Close()
		}
		return err
	}
	if err := connect("", ""); err == nil {
		t.Fatal("connected without a client certificate")
	}
	if err := connect(strangerCert, strangerKeyFile); err == nil {
		t.Fatal("connected with a certificate of another CA")
	}
	if err := connect(clientCert, clientKey); err != nil {
		t.Fatalf("client certificate of the CA: %v", err)
	}
}

// serve with a TLS client port and a subscriber from a password file: the
// subscriber reads the log serve wrote and cannot delete it; anonymous and
// plaintext clients are refused.
func TestServeNATSPortWithTLSAndASubscriber(t *testing.T) {
	certFile, keyFile, roots := selfSigned(t)
	pwFile := filepath.Join(t.TempDir(), "password")
	writeFile(t, pwFile, "s3cret-from-a-secret\n")
	addr := freeAddr(t)
	o := natsServeOptions(t, natsOptions{listen: addr, subscriberUser: "audit", subscriberPasswordFN: pwFile, tlsCert: certFile, tlsKey: keyFile})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p := startTestPlane(t, ctx, o)
	go func() { _ = p.views.Run(ctx) }()
	cfg, err := loadPool(o.config)
	if err != nil {
		t.Fatal(err)
	}
	leadNow(t, ctx, p)
	if err := p.applyPool(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	last, err := p.store.LastSeq(ctx)
	if err != nil || last == 0 {
		t.Fatalf("serve wrote nothing: %v", err)
	}
	url := "tls://" + addr
	tlsOpt := nats.Secure(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})

	for name, opts := range map[string][]nats.Option{
		"anonymous over TLS":         {tlsOpt},
		"subscriber without TLS":     {nats.UserInfo("audit", "s3cret-from-a-secret")},
		"wrong password over TLS":    {tlsOpt, nats.UserInfo("audit", "s3cret")},
		"password with its newline":  {tlsOpt, nats.UserInfo("audit", "s3cret-from-a-secret\n")},
		"default user name over TLS": {tlsOpt, nats.UserInfo("subscriber", "s3cret-from-a-secret")},
	} {
		u := url
		if name == "subscriber without TLS" {
			u = "nats://" + addr
		}
		if nc, err := nats.Connect(u, append(opts, nats.NoReconnect(), nats.Timeout(2*time.Second))...); err == nil {
			nc.Close()
			t.Fatalf("%s: connected", name)
		}
	}

	quiet := nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})
	nc, err := nats.Connect(url, tlsOpt, nats.UserInfo("audit", "s3cret-from-a-secret"), nats.NoReconnect(), quiet)
	if err != nil {
		t.Fatalf("subscriber: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// It reads its copy of the log, which follows the log.
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		s, err := js.Stream(ctx, "CLAIMSTREAM")
		if err != nil {
			return fmt.Errorf("stream info: %w", err)
		}
		if s.CachedInfo().State.LastSeq != last {
			return fmt.Errorf("the subscriber sees seq %d, serve wrote %d", s.CachedInfo().State.LastSeq, last)
		}
		return nil
	})
	// It reads the events serve wrote through a consumer of its own.
	cons, err := js.CreateConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{Durable: "audit", AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		t.Fatalf("consumer: %v", err)
	}
	msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if e := events.FromMsg(p.store.Subjects(), msg.Subject(), 1, msg.Headers(), msg.Data()); e.Err != nil {
		t.Fatalf("the subscriber read a bad event: %v", e.Err)
	}
	if err := msg.DoubleAck(ctx); err != nil {
		t.Fatalf("ack: %v", err)
	}
	dctx, dcancel := context.WithTimeout(ctx, time.Second)
	defer dcancel()
	if err := js.DeleteStream(dctx, "CLAIMSTREAM"); err == nil {
		t.Fatal("the subscriber deleted the stream")
	}
	if _, err := p.store.LastSeq(ctx); err != nil {
		t.Fatalf("the stream is gone: %v", err)
	}
	// serve still appends.
	leadNow(t, ctx, p)
	if err := p.applyPool(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

// serve keeps subscribers off the webhook sinks' consumers (from --sinks):
// those are in the process's account, and the subscriber sees only its own
// copy of the log. The scrape endpoint counts skipped log entries.
func TestServeProtectsTheSinksConsumerFromSubscribers(t *testing.T) {
	var delivered atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { delivered.Add(1) }))
	defer hook.Close()
	dir := t.TempDir()
	sinksFile, pwFile := filepath.Join(dir, "sinks.yaml"), filepath.Join(dir, "password")
	writeFile(t, sinksFile, "sinks:\n  - name: hook\n    url: "+hook.URL+"\n    start: all\n")
	writeFile(t, pwFile, "pw")
	natsAddr, metricsAddr := freeAddr(t), freeAddr(t)
	o := natsServeOptions(t, natsOptions{listen: natsAddr, subscriberUser: "subscriber", subscriberPasswordFN: pwFile})
	o.sinks, o.metricsAddress = sinksFile, metricsAddr
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()

	var nc *nats.Conn
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		var err error
		nc, err = nats.Connect("nats://"+natsAddr, nats.UserInfo("subscriber", "pw"), nats.NoReconnect(), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
		return err
	})
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// The sink delivers: its consumer exists, in the process's account.
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if delivered.Load() == 0 {
			return errors.New("the sink delivered nothing yet")
		}
		return nil
	})
	if _, err := js.Consumer(ctx, "CLAIMSTREAM", "sink-hook"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("the sink's consumer seen from the subscriber: %v, want not found", err)
	}
	short, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if err := js.DeleteConsumer(short, "CLAIMSTREAM", "sink-hook"); err == nil {
		t.Fatal("a subscriber deleted a consumer named like the sink's")
	}
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		b, err := scrapeMetrics(metricsAddr)
		if err != nil {
			return err
		}
		if !strings.Contains(b, `claimstream_log_entries_skipped_total{reason="bad_entry"} 0`) {
			return errors.New("no skipped-entries counter on the scrape endpoint")
		}
		return nil
	})
	// A push consumer of the subscriber's delivering outside its inboxes
	// is removed, and counted on the scrape.
	if _, err := js.CreatePushConsumer(ctx, "CLAIMSTREAM", jetstream.ConsumerConfig{
		Durable: "aimed", DeliverSubject: "elsewhere.aimed", AckPolicy: jetstream.AckNonePolicy,
	}); err != nil {
		t.Fatal(err)
	}
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		if _, err := js.Consumer(ctx, "CLAIMSTREAM", "aimed"); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("the push consumer is still there: %v", err)
		}
		b, err := scrapeMetrics(metricsAddr)
		if err != nil {
			return err
		}
		if !strings.Contains(b, "claimstream_nats_subscriber_consumers_removed_total 1\n") {
			return errors.New("no removal counted on the scrape endpoint")
		}
		return nil
	})
}
