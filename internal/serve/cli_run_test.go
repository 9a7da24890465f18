package serve

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/internal/golden"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// The CLI's own tests are in internal/cli; these run it as the claimstream
// binary registers it, beside version, backup and restore.

var (
	eventIDs = regexp.MustCompile(`"id":"[0-9a-f]{32}"`)
	hostPort = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+`)
)

// runCLI runs one invocation of the claimstream root, against the
// fixture's server when there is one, and returns stdout and the error.
func runCLI(t *testing.T, f *resttest.Fixture, args ...string) string {
	t.Helper()
	root := NewRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	full := append([]string{}, args...)
	if f != nil {
		full = append(full, "--server", f.Server.URL, "--token", resttest.Token, "--cli-config", "")
	}
	root.SetArgs(full)
	if err := root.ExecuteContext(t.Context()); err != nil {
		out.WriteString("error: " + err.Error() + "\n")
	}
	return out.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", "cli", name+".golden"), hostPort.ReplaceAllString(eventIDs.ReplaceAllString(got, `"id":"<id>"`), "http://127.0.0.1:<port>"), "go test ./internal/serve -run 'Version|Unauthorized|DeadLetters'")
}

// TestCLIUnauthorizedSaysWhereTheTokenIsLookedFor: a refused token names
// where it came from, the lookup order (flag, env, config file, the local
// data dir's token file) and how to pass one.
func TestCLIUnauthorizedSaysWhereTheTokenIsLookedFor(t *testing.T) {
	f := resttest.Scripted(t)
	t.Setenv("CLAIMSTREAM_TOKEN", "")
	t.Setenv("XDG_STATE_HOME", "/state")
	dir := t.TempDir()
	cfg := dir + "/cli.yaml"
	writeFile(t, cfg, "token: stale-token\n")
	var out strings.Builder
	for _, args := range [][]string{
		{"get", "claims", "--server", f.Server.URL, "--token", "wrong", "--cli-config", ""},
		{"get", "claims", "--server", f.Server.URL, "--cli-config", cfg},
	} {
		root := NewRoot()
		var b bytes.Buffer
		root.SetOut(&b)
		root.SetErr(&b)
		root.SetArgs(args)
		err := root.Execute()
		out.WriteString("$ claimstream " + strings.ReplaceAll(strings.Join(args, " "), dir, "<dir>") + "\n")
		if err == nil {
			t.Fatalf("%v: a wrong token was accepted", args)
		}
		out.WriteString("error: " + strings.ReplaceAll(err.Error(), dir, "<dir>") + "\n")
	}
	checkGolden(t, "unauthorized", out.String())
}
