package serve

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/internal/cli"
	"github.com/claimstream/claimstream/internal/power/powercmd"
)

// The CLI falls back on the token of a serve on this machine.
func init() {
	cli.Local.DataDir = defaultDataDir
	cli.Local.TokenFile = apiTokenFile
}

// NewRoot is the claimstream command: serve and the verbs that inspect and
// operate a plane.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "claimstream",
		Short:         "An event-sourced control plane that switches machines on and off with demand",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServe(), newConfig())
	root.AddCommand(cli.Commands()...)
	root.AddCommand(newBackupCmd(), newRestoreCmd())
	root.AddCommand(powercmd.New())
	withVersion(root)
	return root
}

// ExitCode is the process's exit code after err, the root command's
// failure: the code a `power` failure carries (its kind), else 1.
func ExitCode(err error) int {
	var e *powercmd.ExitError
	if errors.As(err, &e) {
		return e.Code
	}
	return 1
}

// newLogger builds the process logger from --log-level and --log-format.
func newLogger(level, format string) (*slog.Logger, error) {
	return newLoggerTo(os.Stderr, level, format)
}

// newLoggerTo is newLogger writing to out.
func newLoggerTo(out io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text", "":
		return slog.New(slog.NewTextHandler(out, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(out, opts)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is not text or json", format)
}

// first is the first of vals that is not empty.
func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
