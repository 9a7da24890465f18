package power

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
)

// What the HTTPS drivers share: a power controller's certificate checked
// against a CA or pinned by its fingerprint (BMCs and Proxmox hosts ship
// self-signed ones), and the reading of a failed connection.

// TLSConfig trusts roots (the system's when nil), or, when fingerprint is
// set, exactly the certificate whose DER has that SHA-256 and no chain.
func TLSConfig(roots *x509.CertPool, fingerprint []byte) *tls.Config {
	tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if len(fingerprint) > 0 {
		want := fingerprint
		// The pinned certificate stands in for the chain.
		tc.InsecureSkipVerify = true
		tc.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate")
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], want) != 1 {
				return &FingerprintError{Got: got[:]}
			}
			return nil
		}
	}
	return tc
}

// FingerprintError: the peer's certificate is not the pinned one.
type FingerprintError struct{ Got []byte }

func (e *FingerprintError) Error() string {
	return "its SHA-256 fingerprint is " + FormatFingerprint(e.Got)
}

// Untrusted: err is a certificate that no given CA vouches for.
func Untrusted(err error) bool {
	var unknown x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &unknown) || errors.As(err, &hostErr) || errors.As(err, &invalid)
}

// Unanswered: err is a connection nobody answered (refused, no route,
// no such host, timed out).
func Unanswered(err error) bool {
	var dnsErr *net.DNSError
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.As(err, &dnsErr) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// ParseFingerprint reads a SHA-256 fingerprint as openssl prints it
// ("sha256 Fingerprint=AB:CD:..."), or as bare hex.
func ParseFingerprint(s string) ([]byte, error) {
	t := strings.TrimSpace(s)
	if i := strings.LastIndex(t, "="); i >= 0 {
		t = t[i+1:]
	}
	t = strings.ReplaceAll(t, ":", "")
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("fingerprint %q: want the certificate's SHA-256, 64 hex digits (openssl x509 -noout -fingerprint -sha256)", s)
	}
	return b, nil
}

// FormatFingerprint writes a fingerprint as openssl does.
func FormatFingerprint(b []byte) string {
	parts := make([]string, len(b))
	for i, c := range b {
		parts[i] = fmt.Sprintf("%02X", c)
	}
	return strings.Join(parts, ":")
}
