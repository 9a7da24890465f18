package cli

import (
	"os"
	"testing"

	"github.com/spf13/cobra"
)

// newRoot is a root with the CLI's verbs, as a binary registers them.
func newRoot() *cobra.Command {
	root := &cobra.Command{Use: "claimstream", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(Commands()...)
	return root
}

func writeFile(t testing.TB, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
