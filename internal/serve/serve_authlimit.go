package serve

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/provider/rest"
)

// authLimitFlags configure the throttling of failed authentications.
type authLimitFlags struct {
	trustedProxies []string
}

func (o *authLimitFlags) addFlags(f *pflag.FlagSet) {
	f.StringSliceVar(&o.trustedProxies, "api-trusted-proxies", nil,
		"reverse proxies in front of the REST API (IPs or CIDRs, comma-separated): failed authentications from them count against the client their X-Forwarded-For names; default none (the header is ignored)")
}

// trusted parses --api-trusted-proxies.
func (o authLimitFlags) trusted() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range o.trustedProxies {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("--api-trusted-proxies: %q is neither an IP address nor a CIDR", s)
		}
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// authLimiter throttles failed authentications per client address, one
// budget for the API and the dashboard's login
// (docs/operations/security.md, "Failed authentications"), counted on the metrics. Its budgets are wall
// time, whatever clock the plane runs on.
func (p *plane) authLimiter(o authLimitFlags) (*rest.AuthLimiter, error) {
	trusted, err := o.trusted()
	if err != nil {
		return nil, err
	}
	lo := rest.AuthLimitOptions{Clock: clock.RealClock{}, Logger: p.log, TrustedProxies: trusted}
	if p.tel != nil {
		lo.OnFailure = p.tel.Metrics.AuthFailure
	}
	return rest.NewAuthLimiter(lo), nil
}
