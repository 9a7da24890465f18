package serve

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/handlers/pool"
)

func newConfig() *cobra.Command {
	cmd := &cobra.Command{Use: "config", Short: "Work with pool files"}
	cmd.AddCommand(&cobra.Command{
		Use:   "validate FILE",
		Short: "Check a pool file; every problem is reported with its line and field",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := pool.Load(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d groups, %d slots: ok\n", args[0], len(cfg.Groups), len(cfg.Slots))
			return nil
		},
	})
	return cmd
}
