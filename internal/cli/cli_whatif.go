package cli

import (
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/projections/cost"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/whatif"
)

// claimstream whatif: the recorded period replayed under other pool files
// (docs/whatif.md), through POST /api/v1/whatif.
func newWhatIfCmd() *cobra.Command {
	o := &Options{}
	var from, to, output string
	var configs []string
	var seed int64
	cmd := &cobra.Command{
		Use:   "whatif --from WHEN [--to WHEN] --config POOL.yaml [--config ...] [--seed N] [-o table|json]",
		Short: "Replay a recorded period under other pool configs: machine-hours, kWh, cost, boots, time to ready, waiting, side by side",
		Long: `whatif replays the demand the log recorded over [--from, --to) through a
simulated pool, once under the config recorded at --from (the baseline) and
once per --config pool file, and prints each beside the recorded period and
its delta against the baseline. The log is only read. --from and --to take
RFC 3339 or a duration before now (7d, 36h); --to defaults to now. Progress
goes to stderr. docs/whatif.md says what the figures can and cannot tell.`,
		Example: "  claimstream whatif --from 7d --config hold-10m.yaml --config max-4.yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("-o %s: want table or json", output)
			}
			if from == "" {
				return fmt.Errorf("--from is required")
			}
			if len(configs) == 0 {
				return fmt.Errorf("--config is required: the pool file to replay the period under (repeat it for more)")
			}
			win, err := cost.ParseWindow(from, to, "", time.Now())
			if err != nil {
				return fmt.Errorf("--from/--to: %w", err)
			}
			if err := whatif.CheckWindow(win.Since, win.Until); err != nil {
				return fmt.Errorf("--from/--to: %w", err)
			}
			req := whatif.Request{From: win.Since, To: win.Until, Seed: seed}
			for _, path := range configs {
				data, err := pool.ReadFile(path)
				if err != nil {
					return fmt.Errorf("--config: %w", err)
				}
				// Checked here too, so a bad file is told at its line before
				// anything is sent.
				if _, err := pool.Parse(path, data); err != nil {
					return err
				}
				req.Candidates = append(req.Candidates, whatif.RequestCandidate{Name: filepath.Base(path), Pool: string(data)})
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			stderr := cmd.ErrOrStderr()
			rep, err := c.WhatIf(cmd.Context(), req, func(p rest.WhatIfProgress) {
				fmt.Fprintf(stderr, "what-if: %s %3.0f%% (%s of %s simulated)\n", p.Run, p.Percent, p.Covered, p.Total)
			})
			if err != nil {
				return err
			}
			if output == "json" {
				return PrintObject(cmd.OutOrStdout(), "json", rep)
			}
			return printWhatIf(cmd.OutOrStdout(), rep)
		},
	}
	o.Bind(cmd, false)
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "start of the recorded period: RFC 3339 or a duration before now (7d)")
	f.StringVar(&to, "to", "", "end of the period (default now)")
	f.StringArrayVar(&configs, "config", nil, "a pool file to replay the period under (repeatable)")
	f.Int64Var(&seed, "seed", 1, "seed of the simulated machines' random draws: one seed, one answer")
	f.StringVarP(&output, "output", "o", "table", "output format: table or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func printWhatIf(w io.Writer, rep *whatif.Report) error {
	fmt.Fprintf(w, "%s to %s, seed %d: %d size calls and %d demand changes replayed\n",
		rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), rep.Seed, rep.Requests, rep.DemandChanges)
	tw := table(w)
	fmt.Fprintln(tw, "RUN\tCLAIMS\tMACHINE-HOURS\tKWH\tCOST\tBOOTS\tFAILED\tTTR-P50\tTTR-P95\tWAIT-MIN\tPEAK")
	row := func(name string, o whatif.Outcome, sign bool) {
		num := func(x float64) string {
			if sign {
				return fmt.Sprintf("%+.3f", x)
			}
			return fmt.Sprintf("%.3f", x)
		}
		in := func(x int) string {
			if sign {
				return fmt.Sprintf("%+d", x)
			}
			return fmt.Sprintf("%d", x)
		}
		dur := func(d time.Duration) string {
			if sign && d >= 0 {
				return "+" + d.String()
			}
			return d.String()
		}
		var costs []string
		for _, c := range slices.Sorted(maps.Keys(o.Cost)) {
			v := fmt.Sprintf("%.4f %s", o.Cost[c], c)
			if sign {
				v = fmt.Sprintf("%+.4f %s", o.Cost[c], c)
			}
			costs = append(costs, v)
		}
		if len(costs) == 0 {
			costs = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, in(o.Claims), num(o.MachineHours), num(o.KWh), strings.Join(costs, ", "),
			in(o.Boots), in(o.FailedBoots), dur(o.TimeToReadyP50), dur(o.TimeToReadyP95), num(o.WaitMinutes), in(o.PeakMachines))
	}
	row("recorded", rep.Recorded, false)
	row("baseline", rep.Baseline, false)
	for i, c := range rep.Candidates {
		row(c.Name, c, false)
		row("  vs baseline", rep.Deltas[i], true)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.FellBack) > 0 {
		fmt.Fprintf(w, "slots with too little history, modelled from their group or the defaults: %s\n", strings.Join(rep.FellBack, ", "))
	}
	return nil
}
