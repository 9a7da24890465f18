package provider

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// pki is a throwaway CA with a server and a client certificate, made in
// process; nothing is written outside the test's temp dir.
type pki struct {
	caPEM                 []byte
	serverCert, serverKey []byte
	clientCert, clientKey []byte
	ca                    *x509.Certificate
	caKey                 *ecdsa.PrivateKey
}

func newPKI(t testing.TB, name string) *pki {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name + " CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca: ca, caKey: key}
	p.serverCert, p.serverKey = p.issue(t, "claimstream-provider", x509.ExtKeyUsageServerAuth, 2)
	p.clientCert, p.clientKey = p.issue(t, "cluster-autoscaler", x509.ExtKeyUsageClientAuth, 3)
	return p
}

func (p *pki) issue(t testing.TB, cn string, usage x509.ExtKeyUsage, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &key.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// clientTLS is what cluster-autoscaler builds from key/cert/cacert:
// ServerName is the host part of the address.
func clientTLS(t testing.TB, caPEM, cert, key []byte) credentials.TransportCredentials {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	if cert != nil {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(tc)
}

// serveTLS runs the provider over creds on a loopback port.
func serveTLS(t testing.TB, creds credentials.TransportCredentials) (string, *handlerstest.Harness) {
	t.Helper()
	h := handlerstest.New(t)
	h.Declare("workers", events.GroupSpec{}, handlerstest.Slots("w", 2)...)
	gs, err := NewGRPCServer(New(h.Views, h.Service, h.Clock, Options{Logger: discard}), creds, false)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lis, gs, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return lis.Addr().String(), h
}

func call(t testing.TB, addr string, creds credentials.TransportCredentials) error {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = pb.NewCloudProviderClient(cc).NodeGroups(ctx, &pb.NodeGroupsRequest{})
	return err
}

func TestMutualTLS(t *testing.T) {
	p := newPKI(t, "good")
	creds, err := ServerCredentials(TLSConfig{CertPEM: p.serverCert, KeyPEM: p.serverKey, ClientCAPEM: p.caPEM})
	if err != nil {
		t.Fatal(err)
	}
	addr, h := serveTLS(t, creds)

	t.Run("right client certificate", func(t *testing.T) {
		good := clientTLS(t, p.caPEM, p.clientCert, p.clientKey)
		if err := call(t, addr, good); err != nil {
			t.Fatalf("mTLS call: %v", err)
		}
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(good))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: ServiceName})
		if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health = %v, %v", hr, err)
		}
		// The verified client's CN is recorded on what it asks for.
		if _, err := pb.NewCloudProviderClient(cc).NodeGroupIncreaseSize(ctx, &pb.NodeGroupIncreaseSizeRequest{Id: "workers", Delta: 1}); err != nil {
			t.Fatal(err)
		}
		h.Read(func(s *projections.State) {
			for _, c := range s.LiveClaims("workers") {
				if c.RequestedBy != "cluster-autoscaler (cn=cluster-autoscaler)" {
					t.Errorf("requestedBy = %q", c.RequestedBy)
				}
			}
		})
	})
	t.Run("no client certificate", func(t *testing.T) {
		if err := call(t, addr, clientTLS(t, p.caPEM, nil, nil)); err == nil {
			t.Fatal("a client without a certificate was served")
		}
	})
	t.Run("client certificate of another CA", func(t *testing.T) {
		rogue := newPKI(t, "rogue")
		if err := call(t, addr, clientTLS(t, p.caPEM, rogue.clientCert, rogue.clientKey)); err == nil {
			t.Fatal("a client signed by another CA was served")
		}
	})
	t.Run("plaintext", func(t *testing.T) {
		if err := call(t, addr, insecure.NewCredentials()); err == nil {
			t.Fatal("a plaintext client was served by the TLS server")
		}
	})
}

func TestServerTLSFromFiles(t *testing.T) {
	p := newPKI(t, "files")
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Server-only TLS (no client CA): a client with no certificate is served.
	creds, err := ServerCredentials(TLSConfig{CertFile: write("tls.crt", p.serverCert), KeyFile: write("tls.key", p.serverKey)})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ := serveTLS(t, creds)
	if err := call(t, addr, clientTLS(t, p.caPEM, nil, nil)); err != nil {
		t.Fatalf("TLS call: %v", err)
	}
	if err := call(t, addr, insecure.NewCredentials()); err == nil {
		t.Fatal("plaintext served by a TLS server")
	}
	// With the client CA from a file: mTLS.
	creds, err = ServerCredentials(TLSConfig{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), ClientCAFile: write("ca.crt", p.caPEM)})
	if err != nil {
		t.Fatal(err)
	}
	addr, _ = serveTLS(t, creds)
	if err := call(t, addr, clientTLS(t, p.caPEM, nil, nil)); err == nil {
		t.Fatal("mTLS server served a client with no certificate")
	}
	if err := call(t, addr, clientTLS(t, p.caPEM, p.clientCert, p.clientKey)); err != nil {
		t.Fatalf("mTLS call: %v", err)
	}
}

func TestTLSRefusals(t *testing.T) {
	h := handlerstest.New(t)
	srv := New(h.Views, h.Service, h.Clock, Options{Logger: discard})
	if _, err := NewGRPCServer(srv, nil, false); err == nil || !strings.Contains(err.Error(), "without TLS") {
		t.Errorf("NewGRPCServer without TLS: %v", err)
	}
	p := newPKI(t, "x")
	creds, _ := ServerCredentials(TLSConfig{CertPEM: p.serverCert, KeyPEM: p.serverKey})
	if _, err := NewGRPCServer(srv, creds, true); err == nil {
		t.Error("NewGRPCServer with TLS and plaintext at once")
	}
	for name, cfg := range map[string]TLSConfig{
		"no certificate": {},
		"bad pair":       {CertPEM: p.serverCert, KeyPEM: p.clientKey},
		"missing file":   {CertFile: "/nonexistent/tls.crt", KeyFile: "/nonexistent/tls.key"},
		"bad client CA":  {CertPEM: p.serverCert, KeyPEM: p.serverKey, ClientCAPEM: []byte("not pem")},
	} {
		if _, err := ServerCredentials(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
