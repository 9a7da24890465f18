package serve

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
)

// exampleServe runs serve in the simulator, playing the example scenario on
// the example pool at 60 times real time, until the test ends; it returns
// serve's API and metrics addresses and the API token it generated.
func exampleServe(t *testing.T) (api, metrics, token string) {
	t.Helper()
	api, metrics = freeAddr(t), freeAddr(t)
	o := serveOptions{
		config: examplePool, configPoll: time.Hour,
		dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		apiAddress: api, metricsAddress: metrics,
		cluster: clusterOptions{scenario: filepath.Join("..", "..", "deploy", "examples", "scenario.yaml"), speed: 60},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	eventstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		b, err := os.ReadFile(filepath.Join(o.dataDir, apiTokenFile))
		token = strings.TrimSpace(string(b))
		if err == nil && token == "" {
			return errors.New("the API token file is empty")
		}
		return err
	})
	return api, metrics, token
}

// cliAgainst runs one CLI command against the API at api with token and
// returns what it printed on stdout and stderr.
func cliAgainst(api, token string, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	root := NewRoot()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{args[0], "--server", "http://" + api, "--token", token, "--cli-config", ""}, args[1:]...))
	err := root.Execute()
	return out.String(), errOut.String(), err
}
