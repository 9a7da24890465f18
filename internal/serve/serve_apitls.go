package serve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"

	"github.com/claimstream/claimstream/provider"
	"github.com/claimstream/claimstream/provider/rest"
)

// apiTLS is the REST API's TLS configuration from --api-tls-cert and
// --api-tls-key (the provider's reloading loader), or nil for plain HTTP.
func (p *plane) apiTLS(o serveOptions) (*tls.Config, error) {
	switch {
	case o.apiAddress == "" || (o.apiTLSCert == "" && o.apiTLSKey == ""):
		return nil, nil
	case o.apiTLSCert == "" || o.apiTLSKey == "":
		return nil, errors.New("--api-tls-cert and --api-tls-key go together: give both, or neither for plain HTTP")
	}
	tc, err := provider.ServerTLS(provider.TLSConfig{CertFile: o.apiTLSCert, KeyFile: o.apiTLSKey, Logger: p.log, Name: "api", OnReloadFailure: p.tlsReloadFailed})
	if err != nil {
		return nil, fmt.Errorf("REST API TLS: %w", err)
	}
	return tc, nil
}

// serveAPI serves the REST API on addr until ctx ends, over TLS when tc is
// set.
func (p *plane) serveAPI(ctx context.Context, addr string, api http.Handler, tc *tls.Config, lim rest.ServerLimits) error {
	if tc == nil {
		return rest.ListenAndServe(ctx, addr, api, lim)
	}
	return rest.ListenAndServeTLS(ctx, addr, api, tc, p.log, lim)
}

// tlsReloadFailed counts a certificate rotation that did not load.
func (p *plane) tlsReloadFailed(server string) {
	if p.tel != nil {
		p.tel.Metrics.TLSReloadFailed(server)
	}
}
