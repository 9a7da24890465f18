package serve

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/internal/buildinfo"
	"github.com/claimstream/claimstream/internal/cli"
)

// newVersion is `claimstream version`; the root's --version prints the
// same (versionTemplate).
func newVersion() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version [-o text|json|yaml]",
		Short:   "Print the version, the VCS revision and the Go version of this build",
		Example: "  claimstream version\n  claimstream version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in := buildinfo.Get()
			switch output {
			case "", "text":
				return printVersion(cmd.OutOrStdout(), in)
			case "json", "yaml":
				return cli.PrintObject(cmd.OutOrStdout(), output, versionInfo{Version: in.Version, Revision: in.Revision, GoVersion: in.GoVersion})
			}
			return fmt.Errorf("-o %s: want text, json or yaml", output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// versionInfo is `version -o json`: the names of claimstream_build_info's
// labels.
type versionInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"goVersion"`
}

// printVersion writes the build's identity: the values
// claimstream_build_info and the traces' service.version carry.
func printVersion(w io.Writer, in buildinfo.Info) error {
	_, err := fmt.Fprintf(w, "claimstream %s\nrevision: %s\ngo: %s\n", in.Version, in.Revision, in.GoVersion)
	return err
}

// withVersion gives root --version, printing what `version` prints.
func withVersion(root *cobra.Command) {
	in := buildinfo.Get()
	var b strings.Builder
	_ = printVersion(&b, in)
	root.Version = in.Version
	// A template: the text goes in as a quoted constant.
	root.SetVersionTemplate("{{" + strconv.Quote(b.String()) + "}}")
	root.AddCommand(newVersion())
}
