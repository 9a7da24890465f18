package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/internal/buildinfo"
)

// newVersion is `claimstream version`; the root's --version prints the
// same (versionTemplate).
func newVersion() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, the VCS revision and the Go version of this build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printVersion(cmd.OutOrStdout(), buildinfo.Get())
		},
	}
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
