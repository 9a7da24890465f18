package cli

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// TestCLIGetWatch: get -w prints the list, then one row each time an item
// changes, following the event stream: a manual claim appears as a new
// row, its deletion as the same claim's row again, in its new phase.
func TestCLIGetWatch(t *testing.T) {
	f := resttest.Scripted(t)
	now := f.H.Clock.Now()
	cliNow = func() time.Time { return now }
	defer func() { cliNow = time.Now }()
	for _, c := range []struct {
		name string
		list []string
	}{
		{"get-claims-watch", []string{"get", "claims", "--slot", "node-3.lan"}},
		{"get-claims-watch-name", []string{"get", "claims", "--slot", "node-3.lan", "-o", "name"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out logcapture.Buffer
			ctx, cancel := context.WithCancel(context.Background())
			root := newRoot()
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs(append(append([]string{}, c.list...), "-w", "--server", f.Server.URL, "--token", resttest.Token, "--cli-config", ""))
			done := make(chan error, 1)
			go func() { done <- root.ExecuteContext(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("watch ended with %v", err)
				}
			}()
			lines := func(n int) func() error {
				return func() error {
					if got := strings.Count(out.String(), "\n"); got < n {
						return errors.New("not yet: " + out.String())
					}
					return nil
				}
			}
			first := strings.Count(runCLI(t, f, c.list...), "\n")
			eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, lines(first))
			bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer bcancel()
			if _, err := f.Client.Recommission(bctx, "node-3.lan", rest.CommandRequest{By: "carol"}); err != nil {
				t.Fatal(err)
			}
			r, err := f.Client.ManualClaim(bctx, "node-3.lan", rest.CommandRequest{By: "carol", Reason: "burn-in"})
			if err != nil {
				t.Fatal(err)
			}
			eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, lines(first+1))
			if _, err := f.Client.DeleteClaim(bctx, r.Claims[0], rest.CommandRequest{By: "carol"}); err != nil {
				t.Fatal(err)
			}
			eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, lines(first+2))
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("watch ended with %v", err)
			}
			done <- nil
			checkGolden(t, c.name, out.String())
		})
	}
}
