package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// certFor is a CA (PEM) and a certificate it signed for the DNS names.
func certFor(t *testing.T, names ...string) ([]byte, tls.Certificate) {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := key(), key()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}
}

// Over TLS the plugin trusts the CA of the API certificate's Secret and
// checks the Service's DNS name, whichever address it dials: another CA,
// or a certificate for another name, is refused.
func TestPluginConnectsOverTLS(t *testing.T) {
	f := resttest.Scripted(t)
	want := runWith(t, f)
	svcName := "prod-claimstream-http.claimstream.svc"
	for _, c := range []struct {
		name     string
		certName string
		otherCA  bool
		wantErr  string
	}{
		{"the Service's certificate", svcName, false, ""},
		{"another CA", svcName, true, "certificate signed by unknown authority"},
		{"another name", "elsewhere.example", false, "certificate is valid for elsewhere.example, not " + svcName},
	} {
		t.Run(c.name, func(t *testing.T) {
			caPEM, cert := certFor(t, c.certName)
			if c.otherCA {
				caPEM, _ = certFor(t, c.certName)
			}
			srv := httptest.NewUnstartedServer(f.Server.Config.Handler)
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
			srv.StartTLS()
			defer srv.Close()
			addr := srv.Listener.Addr().(*net.TCPAddr)
			r := release{name: "prod", clusterIP: "127.0.0.1", port: int32(addr.Port), ready: true, tlsSecret: "prod-claimstream-server-tls"}
			objs := append(r.objects(resttest.Token), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.tlsSecret, Namespace: ns}, Data: map[string][]byte{"ca.crt": caPEM}})
			got, err := runPlugin(t, fake.NewClientset(objs...), nil, "get", "groups", "--port-forward", "never")
			if c.wantErr == "" {
				if err != nil || got != want {
					t.Fatalf("over TLS: %v\n%s\nwant\n%s", err, got, want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "https://127.0.0.1:"+strconv.Itoa(addr.Port)) {
				t.Fatalf("%s: %v, want an error saying %q", c.name, err, c.wantErr)
			}
		})
	}
}
