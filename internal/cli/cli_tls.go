package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// bindTLS adds the flags of an https --server.
func (o *Options) bindTLS(f *pflag.FlagSet) {
	f.StringVar(&o.caFile, "ca-file", "", "for an https --server: trust the CA of this PEM file (config file: caFile; default: the system's CAs)")
	f.BoolVar(&o.insecureSkipVerify, "insecure-skip-verify", false, "for an https --server: do not verify its certificate (tests only: the token goes to whoever answers)")
}

// httpClient is the HTTP client of the API at server: the default one for
// http://, one that trusts caFile (or the system's CAs) for https://.
func (o *Options) httpClient(server, caFile string) (*http.Client, error) {
	if !strings.HasPrefix(server, "https://") {
		if o.caFile != "" || o.insecureSkipVerify {
			return nil, fmt.Errorf("--ca-file and --insecure-skip-verify are for an https:// --server, not %s", server)
		}
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.insecureSkipVerify} //nolint:gosec // explicit opt-in, documented as tests only
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, errors.New("--ca-file " + caFile + ": no PEM certificate found")
		}
		tc.RootCAs = roots
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr}, nil
}
