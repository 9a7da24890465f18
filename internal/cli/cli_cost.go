package cli

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/projections/cost"
)

// claimstream cost: what the pool cost over a period (docs/cost.md), from
// the REST API's /api/v1/cost.
func newCostCmd() *cobra.Command {
	o := &Options{}
	var since, until, month, by, output string
	var forecast bool
	cmd := &cobra.Command{
		Use:   "cost [--month YYYY-MM | --since WHEN [--until WHEN]] [--by group|slot|requester|claim] [--forecast]",
		Short: "Print what the pool cost over a period: machine-hours, kWh, money, boots, and the up-time no claim wanted",
		Long: `cost folds the event log over a period: for every group, slot, requester
or claim, the hours its machines were up and booting, the energy they drew,
what that cost in the group's currency, the boots and failed boots, and the
up-time no claim wanted with the reason the machine stayed up (no-claim,
input-law-pause, drain, shutdown-refused). A machine's second belongs to
the live claim of its slot at that second, else to "unclaimed". WHEN is
RFC 3339 or a duration before now (7d, 36h); without a period, the last
30 days. A period that has not ended is reported until now (what has
happened); --forecast adds, apart and labelled, what the whole period
would cost if every machine up now stayed up until its end.
docs/cost.md says how each number is computed.`,
		Example: "  claimstream cost --month 2026-11\n  claimstream cost --month 2026-12 --forecast\n  claimstream cost --since 7d --by requester -o csv",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "table", "json", "yaml", "csv":
			default:
				return fmt.Errorf("-o %s: want table, json, yaml or csv", output)
			}
			if _, err := cost.ParseDimension(by); err != nil {
				return fmt.Errorf("--%w", err)
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			q := url.Values{"by": {by}}
			if forecast {
				q.Set("forecast", "true")
			}
			for k, v := range map[string]string{"since": since, "until": until, "month": month} {
				if v != "" {
					q.Set(k, v)
				}
			}
			rep, err := c.Cost(cmd.Context(), q)
			if err != nil {
				return err
			}
			return printCost(cmd.OutOrStdout(), output, rep)
		},
	}
	o.Bind(cmd, false)
	f := cmd.Flags()
	f.StringVar(&since, "since", "", "start of the period: RFC 3339 or a duration before now (7d, 36h)")
	f.StringVar(&until, "until", "", "end of the period (default now)")
	f.StringVar(&month, "month", "", "the calendar month YYYY-MM (UTC), instead of --since/--until")
	f.StringVar(&by, "by", "group", "one row per group, slot, requester or claim")
	f.BoolVar(&forecast, "forecast", false, "also forecast the whole period (it must end after now): its cost if every machine up now stayed up until its end, shown apart from what happened")
	f.StringVarP(&output, "output", "o", "table", "output format: table, json, yaml or csv")
	_ = cmd.RegisterFlagCompletionFunc("by", cobra.FixedCompletions([]string{"group", "slot", "requester", "claim"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml", "csv"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

var costHeader = []string{"machine-hours", "boot-hours", "kwh", "cost", "currency", "boots", "failed-boots", "unwanted-share"}

func printCost(w io.Writer, format string, rep cost.Report) error {
	switch format {
	case "json", "yaml":
		return PrintObject(w, format, rep)
	case "csv":
		cw := csv.NewWriter(w)
		head := append([]string{string(rep.By)}, costHeader...)
		for _, r := range cost.Reasons {
			head = append(head, "unwanted-hours-"+r)
		}
		_ = cw.Write(head)
		for _, r := range append(rep.Rows, rep.Totals...) {
			_ = cw.Write(costFields(r))
		}
		if fc := rep.Forecast; fc != nil {
			// The forecast's rows are keyed apart, so no sum mixes them in.
			for _, r := range append(fc.Rows, fc.Totals...) {
				r.Key = "forecast:" + r.Key
				_ = cw.Write(costFields(r))
			}
		}
		cw.Flush()
		return cw.Error()
	}
	fmt.Fprintf(w, "%s to %s, by %s\n", rep.Since.Format("2006-01-02T15:04:05Z07:00"), rep.Until.Format("2006-01-02T15:04:05Z07:00"), rep.By)
	if rep.AskedUntil != nil {
		fmt.Fprintf(w, "(the period asked for ends at %s, after now: cut at now)\n", rep.AskedUntil.Format("2006-01-02T15:04:05Z07:00"))
	}
	if err := costTable(w, rep.By, append(rep.Rows, rep.Totals...)); err != nil {
		return err
	}
	if fc := rep.Forecast; fc != nil {
		fmt.Fprintf(w, "\nFORECAST to %s (%s):\n", fc.Until.Format("2006-01-02T15:04:05Z07:00"), fc.Basis)
		return costTable(w, rep.By, append(fc.Rows, fc.Totals...))
	}
	return nil
}

func costTable(w io.Writer, by cost.Dimension, rows []cost.Row) error {
	tw := table(w)
	fmt.Fprintf(tw, "%s\tMACHINE-HOURS\tBOOT-HOURS\tKWH\tCOST\tBOOTS\tFAILED\tUNWANTED\tNO-CLAIM\tINPUT-LAW-PAUSE\tDRAIN\tSHUTDOWN-REFUSED\n", strings.ToUpper(string(by)))
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.4f %s\t%d\t%d\t%.0f%%\t%.3f\t%.3f\t%.3f\t%.3f\n",
			r.Key, r.MachineHours, r.BootHours, r.KWh, r.Cost, r.Currency, r.Boots, r.FailedBoots, 100*r.UnwantedShare,
			r.UnwantedHours[cost.ReasonNoClaim], r.UnwantedHours[cost.ReasonInputLawPause], r.UnwantedHours[cost.ReasonDrain], r.UnwantedHours[cost.ReasonShutdownRefused])
	}
	return tw.Flush()
}

func costFields(r cost.Row) []string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	out := []string{r.Key, f(r.MachineHours), f(r.BootHours), f(r.KWh), f(r.Cost), r.Currency, strconv.Itoa(r.Boots), strconv.Itoa(r.FailedBoots), f(r.UnwantedShare)}
	for _, reason := range cost.Reasons {
		out = append(out, f(r.UnwantedHours[reason]))
	}
	return out
}
