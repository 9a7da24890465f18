package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/provider/rest"
)

// newSinksCmd is `claimstream sinks`: the webhook sinks' dead letters.
func newSinksCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "sinks", Short: "The webhook sinks' dead letters: list them, send them again"}
	cmd.AddCommand(newDeadLettersCmd(), newRedeliverCmd())
	return cmd
}

func newDeadLettersCmd() *cobra.Command {
	o := &Options{}
	var sink string
	cmd := &cobra.Command{
		Use:     "dead-letters",
		Short:   "List the events a sink gave up on: sink, event id, type and subject, attempts, last error, time",
		Example: "  claimstream sinks dead-letters\n  claimstream sinks dead-letters --sink alerts -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := o.format()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			l, err := c.ListDeadLetters(cmd.Context(), sink)
			if err != nil {
				return err
			}
			if format == "json" || format == "yaml" {
				return PrintObject(cmd.OutOrStdout(), format, l)
			}
			return deadLetterTable(cmd.OutOrStdout(), l.Items, format == "wide")
		},
	}
	o.Bind(cmd, true)
	cmd.Flags().StringVar(&sink, "sink", "", "only this sink's dead letters")
	return cmd
}

func deadLetterTable(w io.Writer, items []sinks.DeadLetterEntry, wide bool) error {
	tw := table(w)
	head := []string{"ID", "SINK", "SEQ", "TYPE", "SUBJECT", "ATTEMPTS", "AT", "LAST-ERROR"}
	if wide {
		head = append(head[:3], append([]string{"EVENT-ID"}, head[3:]...)...)
	}
	row(tw, head...)
	for _, d := range items {
		cols := []string{fmt.Sprint(d.ID), d.Sink, fmt.Sprint(d.Seq), d.Type, d.Subject, fmt.Sprint(d.Attempts), stamp(d.Time), oneLine(d.LastError)}
		if wide {
			cols = append(cols[:3], append([]string{d.EventID}, cols[3:]...)...)
		}
		row(tw, cols...)
	}
	return tw.Flush()
}

func newRedeliverCmd() *cobra.Command {
	o := &Options{}
	var sink string
	var all bool
	cmd := &cobra.Command{
		Use:   "redeliver ID... | --all [--sink NAME]",
		Short: "Send dead letters again through their sink; each is removed only once its receiver accepted the event",
		Long: `redeliver asks serve to send the named dead letters' events again (one
attempt each, through the sink's own URL, mode, headers and timeout). A dead
letter whose receiver accepts the event is removed; one that fails again is
kept, and the command fails naming it. The ids are those of
"claimstream sinks dead-letters".`,
		Example: "  claimstream sinks redeliver 3 4\n  claimstream sinks redeliver --all --sink alerts",
		RunE: func(cmd *cobra.Command, args []string) error {
			req := sinks.RedeliverRequest{All: all, Sink: sink}
			switch {
			case all && len(args) > 0:
				return errors.New("give dead-letter ids or --all, not both")
			case !all && len(args) == 0:
				return errors.New("give dead-letter ids (claimstream sinks dead-letters lists them) or --all")
			case !all && sink != "":
				return errors.New("--sink goes with --all; an id names its sink already")
			}
			for _, a := range args {
				id, err := strconv.ParseUint(a, 10, 64)
				if err != nil || id == 0 {
					return fmt.Errorf("dead-letter id %q: want a number from `claimstream sinks dead-letters`", a)
				}
				req.IDs = append(req.IDs, id)
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			res, err := c.Redeliver(cmd.Context(), req)
			if err != nil {
				return err
			}
			return printRedelivered(cmd.OutOrStdout(), res)
		},
	}
	o.Bind(cmd, false)
	cmd.Flags().BoolVar(&all, "all", false, "every dead letter (of --sink, when given)")
	cmd.Flags().StringVar(&sink, "sink", "", "with --all: only this sink's")
	return cmd
}

func printRedelivered(w io.Writer, res rest.RedeliverAnswer) error {
	if len(res.Results) == 0 {
		fmt.Fprintln(w, "no dead letters to redeliver")
		return nil
	}
	failed := 0
	for _, r := range res.Results {
		switch {
		case r.Delivered && r.Error == "":
			fmt.Fprintf(w, "dead letter %d: %s seq %d delivered to %s, removed\n", r.ID, r.EventID, r.Seq, r.Sink)
		case r.Delivered:
			fmt.Fprintf(w, "dead letter %d: %s seq %d delivered to %s; %s\n", r.ID, r.EventID, r.Seq, r.Sink, r.Error)
		default:
			failed++
			fmt.Fprintf(w, "dead letter %d: %s seq %d NOT delivered to %s, kept: %s\n", r.ID, r.EventID, r.Seq, r.Sink, oneLine(r.Error))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d dead letters not delivered (kept)", failed, len(res.Results))
	}
	return nil
}

// oneLine folds an error's whitespace (a receiver's answer body may end in
// a newline) so a row stays one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
