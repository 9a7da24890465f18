package serve

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/claimstream/claimstream/provider/rest"
)

// TestMetricsServerHasCapsOfItsOwn: the metrics server, where no
// connection authenticates, gets small caps of its own, the flags' when
// they are smaller, and the flags' timeouts.
func TestMetricsServerHasCapsOfItsOwn(t *testing.T) {
	for _, tc := range []struct {
		args            []string
		all, perAddress int
	}{
		{nil, metricsMaxConns, metricsMaxConnsPerAddr},
		{[]string{"--http-max-unauthenticated-conns=0", "--http-max-unauthenticated-per-ip=-1"}, metricsMaxConns, metricsMaxConnsPerAddr},
		{[]string{"--http-max-unauthenticated-conns=10", "--http-max-unauthenticated-per-ip=2"}, 10, 2},
	} {
		var o httpLimitFlags
		f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		o.addFlags(f)
		if err := f.Parse(append([]string{"--http-idle-timeout=7s"}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		m := o.metrics()
		if m.MaxUnauthenticated != tc.all || m.MaxUnauthenticatedPerAddress != tc.perAddress || m.IdleTimeout != o.IdleTimeout || o.IdleTimeout == 0 {
			t.Errorf("%v: metrics limits %+v, want caps %d and %d and the flags' timeouts", tc.args, m, tc.all, tc.perAddress)
		}
		if tc.args == nil && o.MaxUnauthenticated != rest.DefaultMaxUnauthenticated {
			t.Errorf("the API's cap is %d, want its own default", o.MaxUnauthenticated)
		}
	}
}
