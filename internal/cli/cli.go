// Package cli is the operator verbs: they talk to a running `claimstream
// serve` over its REST API (provider/rest). The claimstream binary and the
// kubectl plugin (cmd/kubectl-claimstream) both register them.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/provider/rest"
)

// DefaultServer is where the CLI looks for the API when nothing says otherwise.
const DefaultServer = "http://127.0.0.1:8087"

// cliNow is the CLI's clock (ages, deadlines); tests set it.
var cliNow = time.Now

// serverNow is the server's clock as of its last answer (ages are measured
// against the clock that wrote the views: a simulator's may run ahead), or
// this machine's when the server did not say.
func serverNow(c *rest.Client) time.Time {
	if t := c.Now(); !t.IsZero() {
		return t
	}
	return cliNow()
}

// Options are the connection and output flags every verb shares.
type Options struct {
	server, token, output, configFile string
	// caFile and insecureSkipVerify are for an https --server (cli_tls.go).
	caFile             string
	insecureSkipVerify bool
}

// cliFile is ~/.config/claimstream/cli.yaml.
type cliFile struct {
	Server string `json:"server"`
	Token  string `json:"token"`
	CAFile string `json:"caFile"`
}

func defaultCLIConfig() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "claimstream", "cli.yaml")
	}
	return ""
}

func (o *Options) Bind(cmd *cobra.Command, output bool) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.server, "server", "", "claimstream API address (env CLAIMSTREAM_SERVER, config file; default "+DefaultServer+")")
	f.StringVar(&o.token, "token", "", "API bearer token (env CLAIMSTREAM_TOKEN, config file)")
	o.bindTLS(f)
	f.StringVar(&o.configFile, "cli-config", defaultCLIConfig(), "CLI config file (YAML: server, token, caFile)")
	if output {
		f.StringVarP(&o.output, "output", "o", "table", "output format: table, wide, json or yaml (get, replay and events also: name, jsonpath=TEMPLATE)")
		_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	}
}

// Client resolves the server and token: flag, then environment, then the
// config file (or what Discover finds), then the default.
func (o *Options) Client() (*rest.Client, error) {
	if Discover != nil && o.server == "" && os.Getenv("CLAIMSTREAM_SERVER") == "" {
		return o.discovered()
	}
	var file cliFile
	if o.configFile != "" {
		b, err := pool.ReadFile(o.configFile)
		switch {
		case err == nil:
			if err := yaml.UnmarshalStrict(b, &file); err != nil {
				return nil, fmt.Errorf("%s: %w", o.configFile, err)
			}
		case !errors.Is(err, os.ErrNotExist):
			return nil, err
		}
	}
	server := first(o.server, os.Getenv("CLAIMSTREAM_SERVER"), file.Server, DefaultServer)
	local := localToken(server)
	token := first(o.token, os.Getenv("CLAIMSTREAM_TOKEN"), file.Token, local)
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	hc, err := o.httpClient(server, first(o.caFile, file.CAFile))
	if err != nil {
		return nil, err
	}
	return &rest.Client{BaseURL: server, Token: token, HTTP: hc, AuthHint: o.tokenHint(file, local)}, nil
}

func (o *Options) format() (string, error) {
	switch o.output {
	case "", "table":
		return "table", nil
	case "wide", "json", "yaml":
		return o.output, nil
	}
	return "", fmt.Errorf("-o %s: want table, wide, json or yaml", o.output)
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// Commands are the operator verbs that talk to serve's API, registered on
// a root (backup and restore are the claimstream binary's: restore opens a
// data dir).
func Commands() []*cobra.Command {
	return []*cobra.Command{
		newGetCmd(), newDescribeCmd(), newEventsCmd(), newAuditCmd(), newReplayCmd(),
		newClaimCmd(), newDeleteCmd(), newDecommissionCmd(), newRecommissionCmd(),
		newCostCmd(), newSinksCmd(), newWhatIfCmd(),
	}
}

// PrintObject writes v as JSON or YAML.
func PrintObject(w io.Writer, format string, v any) error {
	b, err := marshalIndent(v)
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// --- get ------------------------------------------------------------------------

func newGetCmd() *cobra.Command {
	o := &Options{}
	var group, slot, phase, selector, sortBy string
	var noHeaders, watch bool
	cmd := &cobra.Command{
		Use:   "get groups|slots|claims [NAME...] | get KIND/NAME...",
		Short: "List groups, slots or claims from the live views",
		Example: "  claimstream get claims\n  claimstream get slots --group homelab -o wide\n  claimstream get claim node-1-3f2a9c -o yaml\n" +
			"  claimstream get claims -w\n  claimstream get slots -o name\n  claimstream get slot/node-1.lan slot/node-2.lan\n  claimstream get claims -o jsonpath='{.items[*].name}'\n  claimstream get claims --no-headers\n" +
			"  claimstream get slots -l rack=a,gpu!=true\n  claimstream get claims -l rack=a --sort-by '{.requestedAt}'",
		Args: cobra.MinimumNArgs(1),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []string{"groups", "slots", "claims"}, cobra.ShellCompDirectiveNoFileComp
			}
			return completeNames(cmd.Context(), o, args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := parseViewsOutput(o.output, noHeaders)
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			kind, names, err := kindAndNames(args)
			if err != nil {
				return err
			}
			f := listFilter{group: group, slot: slot, phase: phase}
			if f.selector, err = parseSelector(kind, selector, len(names) > 0); err != nil {
				return err
			}
			key, err := parseSortBy(sortBy)
			if err != nil {
				return err
			}
			v, err := fetch(cmd.Context(), c, kind, names, f)
			if err != nil {
				return err
			}
			if err := sortViews(key, kind, &v); err != nil {
				return err
			}
			if err := printViews(cmd.OutOrStdout(), out, kind, v, len(names) > 0, serverNow(c)); err != nil || !watch {
				return err
			}
			return watchViews(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), c, out, kind, v, names, f)
		},
	}
	o.Bind(cmd, true)
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "print the table rows without the header")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the list, keep printing a row each time one changes (follows the event stream)")
	cmd.Flags().StringVar(&group, "group", "", "only this group's slots or claims")
	cmd.Flags().StringVar(&slot, "slot", "", "only this slot's claims")
	cmd.Flags().StringVar(&phase, "phase", "", "only claims in this phase (pending, booting, ready, failed, completed)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only slots whose labels (the slot's spec.labels) match, and claims on those slots (e.g. -l rack=a,tier in (hot,warm),!gpu)")
	cmd.Flags().StringVar(&sortBy, "sort-by", "", "sort the list by this JSONPath over each item, as -o json prints it (e.g. '{.requestedAt}', .spec.providerID)")
	return cmd
}

// kindAndNames reads the resource and names of get or describe: "KIND
// NAME..." or, as -o name prints them, "KIND/NAME..." (one kind).
func kindAndNames(args []string) (string, []string, error) {
	first, _, slashed := strings.Cut(args[0], "/")
	if !slashed {
		kind, err := resource(args[0])
		if err != nil {
			return "", nil, err
		}
		for _, a := range args[1:] {
			if strings.Contains(a, "/") {
				return "", nil, fmt.Errorf("%q: give either KIND NAME... or KIND/NAME..., not both", a)
			}
		}
		return kind, args[1:], nil
	}
	kind, err := resource(first)
	if err != nil {
		return "", nil, fmt.Errorf("%q: %w", args[0], err)
	}
	names := make([]string, 0, len(args))
	for _, a := range args {
		k, name, ok := strings.Cut(a, "/")
		if !ok || name == "" {
			return "", nil, fmt.Errorf("%q: want KIND/NAME, as the first argument (%s)", a, args[0])
		}
		if other, err := resource(k); err != nil || other != kind {
			return "", nil, fmt.Errorf("%q: every KIND/NAME must be of one kind (%s, as %s)", a, kind, args[0])
		}
		names = append(names, name)
	}
	return kind, names, nil
}

// resource normalizes a resource name: group(s), slot(s), claim(s).
func resource(s string) (string, error) {
	switch strings.ToLower(s) {
	case "group", "groups", "ng":
		return "groups", nil
	case "slot", "slots":
		return "slots", nil
	case "claim", "claims":
		return "claims", nil
	}
	return "", fmt.Errorf("unknown resource %q: want groups, slots or claims", s)
}

// views is what get and replay print.
type views struct {
	Seq    uint64
	Groups []rest.Group
	Slots  []rest.Slot
	Claims []rest.Claim
}

func fetch(ctx context.Context, c *rest.Client, kind string, names []string, f listFilter) (views, error) {
	v, err := fetchAll(ctx, c, kind, names, f.group, f.slot, f.phase)
	if err != nil {
		return v, err
	}
	return v, selectViews(ctx, c, kind, f, &v)
}

func fetchAll(ctx context.Context, c *rest.Client, kind string, names []string, group, slot, phase string) (views, error) {
	var v views
	switch kind {
	case "groups":
		if len(names) > 0 {
			for _, n := range names {
				g, err := c.Group(ctx, n)
				if err != nil {
					return v, err
				}
				v.Groups = append(v.Groups, g)
			}
			return v, nil
		}
		l, err := c.Groups(ctx)
		v.Seq, v.Groups = l.Seq, l.Items
		return v, err
	case "slots":
		if len(names) > 0 {
			for _, n := range names {
				s, err := c.Slot(ctx, n)
				if err != nil {
					return v, err
				}
				v.Slots = append(v.Slots, s)
			}
			return v, nil
		}
		l, err := c.Slots(ctx, group)
		v.Seq, v.Slots = l.Seq, l.Items
		return v, err
	default:
		if len(names) > 0 {
			for _, n := range names {
				cl, err := c.Claim(ctx, n)
				if err != nil {
					return v, err
				}
				v.Claims = append(v.Claims, cl)
			}
			return v, nil
		}
		l, err := c.Claims(ctx, group, slot, phase)
		v.Seq, v.Claims = l.Seq, l.Items
		return v, err
	}
}

func printViews(w io.Writer, out viewsOutput, kind string, v views, named bool, now time.Time) error {
	switch out.format {
	case "json", "yaml", "jsonpath":
		var obj any
		switch kind {
		case "groups":
			obj = listOrOne(v.Seq, v.Groups, named)
		case "slots":
			obj = listOrOne(v.Seq, v.Slots, named)
		default:
			obj = listOrOne(v.Seq, v.Claims, named)
		}
		if out.format == "jsonpath" {
			return printJSONPath(w, out.jsonpath, obj)
		}
		return PrintObject(w, out.format, obj)
	case "name":
		return printNames(w, kind, v)
	}
	wide, head := out.format == "wide", !out.noHeaders
	switch kind {
	case "groups":
		return groupTable(w, v.Groups, wide, head)
	case "slots":
		return slotTable(w, v.Slots, wide, head, now)
	default:
		return claimTable(w, v.Claims, wide, head, now)
	}
}

func listOrOne[T any](seq uint64, items []T, named bool) any {
	if named && len(items) == 1 {
		return items[0]
	}
	if items == nil {
		items = []T{}
	}
	return rest.List[T]{Seq: seq, Items: items}
}

// completeNames asks the server for the names of a resource.
func completeNames(ctx context.Context, o *Options, res string) ([]cobra.Completion, cobra.ShellCompDirective) {
	kind, err := resource(res)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := o.Client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := fetch(ctx, c, kind, nil, listFilter{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, g := range v.Groups {
		out = append(out, g.Name)
	}
	for _, s := range v.Slots {
		out = append(out, s.Name)
	}
	for _, c := range v.Claims {
		out = append(out, c.Name)
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

func completeSlots(o *Options) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeNames(cmd.Context(), o, "slots")
	}
}

// --- describe -------------------------------------------------------------------

func newDescribeCmd() *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "describe slot|claim|group NAME | describe KIND/NAME",
		Short: "Show everything the views know of a slot, claim or group, with the last-claim digest and the recent timeline",
		Args:  cobra.RangeArgs(1, 2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []string{"slot", "claim", "group"}, cobra.ShellCompDirectiveNoFileComp
			}
			return completeNames(cmd.Context(), o, args[0])
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Client()
			if err != nil {
				return err
			}
			kind, names, err := kindAndNames(args)
			if err != nil {
				return err
			}
			if len(names) != 1 {
				return fmt.Errorf("describe takes one %s: KIND NAME or KIND/NAME", strings.TrimSuffix(kind, "s"))
			}
			name := names[0]
			ctx, w := cmd.Context(), cmd.OutOrStdout()
			now := func() time.Time { return serverNow(c) }
			switch kind {
			case "groups":
				g, err := c.Group(ctx, name)
				if err != nil {
					return err
				}
				slots, err := c.Slots(ctx, g.Name)
				if err != nil {
					return err
				}
				return describeGroup(w, g, slots.Items, now())
			case "slots":
				s, err := c.Slot(ctx, name)
				if err != nil {
					return err
				}
				claims, err := c.Claims(ctx, "", s.Name, "")
				if err != nil {
					return err
				}
				return describeSlot(w, s, claims.Items, now())
			default:
				cl, err := c.Claim(ctx, name)
				if err != nil {
					return err
				}
				return describeClaim(w, cl, now())
			}
		},
	}
	o.Bind(cmd, false)
	return cmd
}

// --- events ---------------------------------------------------------------------

type eventFlags struct {
	slot, claim, group, since, until string
	types                            []string
	from                             uint64
	last                             int
}

func (f *eventFlags) bind(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.slot, "slot", "", "only this slot's events")
	fl.StringVar(&f.claim, "claim", "", "only this claim's events")
	fl.StringVar(&f.group, "group", "", "only this group's events")
	fl.StringSliceVar(&f.types, "type", nil, "only events of these types (ClaimFailed,ShutdownFired)")
	fl.StringVar(&f.since, "since", "", "only events at or after this time (RFC 3339, or a duration ago: 2h)")
	fl.StringVar(&f.until, "until", "", "only events at or before this time (RFC 3339, or a duration ago)")
	fl.Uint64Var(&f.from, "from", 0, "only events from this sequence on")
	fl.IntVar(&f.last, "last", 0, "only the newest N matching events")
}

func (f *eventFlags) query(now time.Time) (rest.EventQuery, error) {
	q := rest.EventQuery{Slot: f.slot, Claim: f.claim, Group: f.group, Types: f.types, From: f.from, Last: f.last}
	var err error
	if q.Since, err = parseWhen("--since", f.since, now); err != nil {
		return q, err
	}
	if q.Until, err = parseWhen("--until", f.until, now); err != nil {
		return q, err
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && q.Since.After(q.Until) {
		return q, fmt.Errorf("--since %s is after --until %s: the range is reversed, no event can match; swap them", q.Since.Format(time.RFC3339), q.Until.Format(time.RFC3339))
	}
	return q, nil
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time (2026-03-04T03:12:00Z) or a duration ago (2h)", flag, s)
}

func newEventsCmd() *cobra.Command {
	o := &Options{}
	ef := &eventFlags{}
	var follow, noHeaders bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the raw event log, filtered by slot, claim, group, type and time; --follow keeps printing",
		Example: "  claimstream events --slot node-1 --since 2h\n  claimstream events --type ClaimFailed,ShutdownAttemptLimitReached --follow\n" +
			"  claimstream events --claim node-1-3f2a9c -o jsonpath='{.type} {.sequence}'\n  claimstream events --last 5 -o name\n" +
			"  claimstream events export --since 2026-03-01T00:00:00Z > march.jsonl",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out, err := parseViewsOutput(o.output, noHeaders)
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			q, err := ef.query(cliNow())
			if err != nil {
				return err
			}
			q.Follow = follow
			w := cmd.OutOrStdout()
			wide := out.format == "wide"
			header := out.noHeaders
			events := c.Events
			if follow {
				events = (&follower{c: c, stderr: cmd.ErrOrStderr()}).events
			}
			return events(cmd.Context(), q, func(e rest.Event) error {
				switch out.format {
				case "json":
					b, err := marshalCompact(e)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(w, "%s\n", b)
					return err
				case "yaml":
					_, _ = fmt.Fprintln(w, "---")
					return PrintObject(w, "yaml", e)
				case "name":
					// event/SEQ: the sequence is what --from takes back.
					_, err := fmt.Fprintf(w, "event/%d\n", e.Seq)
					return err
				case "jsonpath":
					// One line per event: the template runs over each.
					if err := printJSONPath(w, out.jsonpath, e); err != nil {
						return err
					}
					_, err := fmt.Fprintln(w)
					return err
				}
				if !header {
					header = true
					eventHeader(w, wide)
				}
				eventRow(w, e, wide)
				return nil
			})
		},
	}
	o.Bind(cmd, true)
	ef.bind(cmd)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events as they are appended")
	cmd.Flags().BoolVar(&noHeaders, "no-headers", false, "print the table rows without the header")

	eo := &Options{}
	xf := &eventFlags{}
	var file string
	export := &cobra.Command{
		Use:   "export",
		Short: "Write the log as CloudEvents (structured mode) in JSON Lines, for archives",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := eo.Client()
			if err != nil {
				return err
			}
			q, err := xf.query(cliNow())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if file != "" && file != "-" {
				f, err := os.Create(file)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			return c.Export(cmd.Context(), q, w)
		},
	}
	eo.Bind(export, false)
	xf.bind(export)
	export.Flags().StringVar(&file, "file", "-", "write to this file instead of stdout")
	cmd.AddCommand(export)
	return cmd
}

// --- audit ----------------------------------------------------------------------

func newAuditCmd() *cobra.Command {
	o := &Options{}
	var slot string
	cmd := &cobra.Command{
		Use:   "audit [slot|claim] NAME",
		Short: "Tell the whole story of a claim or a slot from the log, in order, with times, causes, Job names and durations",
		Long: `audit reads a slot's history from the event log (not the views), so it tells
the story of claims long collected from the views. "audit slot S" tells every
claim the slot ever had; "audit claim C" one claim's story. A claim is found
from the views or from the slots its name can belong to; a collected claim
of a renamed or truncated slot needs --slot. "audit NAME" tries a slot, then
a claim.`,
		Example: "  claimstream audit slot node-1\n  claimstream audit claim node-1-3f2a9c\n  claimstream audit node-1-3f2a9c --slot node-1",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			format, err := o.format()
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var a rest.Audit
			switch {
			case len(args) == 2 && (args[0] == "slot" || args[0] == "slots"):
				a, err = c.AuditSlot(ctx, args[1])
			case len(args) == 2 && (args[0] == "claim" || args[0] == "claims"):
				a, err = c.AuditClaim(ctx, args[1], slot)
			case len(args) == 2:
				return fmt.Errorf("audit %s: want `audit slot NAME` or `audit claim NAME`", args[0])
			case slot != "":
				a, err = c.AuditClaim(ctx, args[0], slot)
			default:
				a, err = c.AuditSlot(ctx, args[0])
				var ae *rest.APIError
				if errors.As(err, &ae) && ae.Status == 404 {
					a, err = c.AuditClaim(ctx, args[0], "")
				}
			}
			if err != nil {
				return err
			}
			if format == "json" || format == "yaml" {
				return PrintObject(cmd.OutOrStdout(), format, a)
			}
			return printAudit(cmd.OutOrStdout(), a)
		},
	}
	o.Bind(cmd, true)
	cmd.Flags().StringVar(&slot, "slot", "", "the slot of a claim collected from the views")
	return cmd
}

// --- replay ---------------------------------------------------------------------

func newReplayCmd() *cobra.Command {
	o := &Options{}
	var at string
	var seq uint64
	cmd := &cobra.Command{
		Use:   "replay groups|slots|claims (--at TIME | --seq N)",
		Short: "Print the views as they were at a past time or sequence, rebuilt from the log",
		Long: `replay rebuilds the views from the event log up to a time (every event at
or before it) or a sequence, and prints them like get, with ages and
deadlines as they read at that time. It starts from the nearest checkpoint
at or before the point and folds only the events after it; a point whose
events expired from the log, with no checkpoint at or before it, is refused.`,
		Example:   "  claimstream replay claims --at 2026-03-04T03:12:00Z\n  claimstream replay slots --seq 1200 -o wide",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"groups", "slots", "claims"},
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := parseViewsOutput(o.output, false)
			if err != nil {
				return err
			}
			kind, err := resource(args[0])
			if err != nil {
				return err
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			var r rest.Replay
			switch {
			case at != "" && seq != 0:
				return errors.New("give --at or --seq, not both")
			case at != "":
				t, perr := parseWhen("--at", at, cliNow())
				if perr != nil {
					return perr
				}
				r, err = c.ReplayAt(cmd.Context(), t)
			case seq != 0:
				r, err = c.ReplaySeq(cmd.Context(), seq)
			default:
				return errors.New("replay needs --at TIME or --seq N")
			}
			if err != nil {
				return err
			}
			when, _ := time.Parse(time.RFC3339Nano, r.At)
			fmt.Fprintf(cmd.ErrOrStderr(), "# views at %s (seq %d), rebuilt from the log\n", r.At, r.Seq)
			return printViews(cmd.OutOrStdout(), out, kind, views{Seq: r.Seq, Groups: r.Groups, Slots: r.Slots, Claims: r.Claims}, false, when)
		},
	}
	o.Bind(cmd, true)
	cmd.Flags().StringVar(&at, "at", "", "the time (RFC 3339, or a duration ago: 90m)")
	cmd.Flags().Uint64Var(&seq, "seq", 0, "the last event's sequence")
	return cmd
}

// --- commands -------------------------------------------------------------------

func defaultBy() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "cli"
}

func printResult(w io.Writer, verb string, r rest.CommandResult) {
	if len(r.Events) == 0 {
		fmt.Fprintf(w, "%s: nothing to do (seq %d)\n", verb, r.Seq)
		return
	}
	for _, name := range r.Claims {
		fmt.Fprintf(w, "claim/%s created\n", name)
	}
	for _, e := range r.Events {
		fmt.Fprintf(w, "#%d %s %s\n", e.Seq, e.Type, first(e.Claim, e.Slot, e.Group))
	}
}

// slotCommand is a verb that acts on one slot through the API: claim,
// decommission, recommission.
func slotCommand(use, short, byHelp, reasonHelp string, call func(*rest.Client, context.Context, string, rest.CommandRequest) (rest.CommandResult, error)) *cobra.Command {
	o := &Options{}
	var by, reason string
	verb := strings.Fields(use)[0]
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Client()
			if err != nil {
				return err
			}
			r, err := call(c, cmd.Context(), args[0], rest.CommandRequest{By: by, Reason: reason})
			if err != nil {
				return err
			}
			printResult(cmd.OutOrStdout(), verb, r)
			return nil
		},
	}
	o.Bind(cmd, false)
	cmd.ValidArgsFunction = completeSlots(o)
	cmd.Flags().StringVar(&by, "by", defaultBy(), byHelp)
	if reasonHelp != "" {
		cmd.Flags().StringVar(&reason, "reason", "", reasonHelp)
	}
	return cmd
}

func newClaimCmd() *cobra.Command {
	return slotCommand("claim SLOT", "Claim a slot's machine by hand", "who asks (recorded as requestedBy)", "why (recorded in the cause)", (*rest.Client).ManualClaim)
}

func newDecommissionCmd() *cobra.Command {
	return slotCommand("decommission SLOT", "Take a slot out of service; its live claim is cancelled or scaled down", "who asks", "why", (*rest.Client).Decommission)
}

func newRecommissionCmd() *cobra.Command {
	return slotCommand("recommission SLOT", "Put a decommissioned slot back into service", "who asks", "", (*rest.Client).Recommission)
}

func newDeleteCmd() *cobra.Command {
	o := &Options{}
	var by string
	cmd := &cobra.Command{
		Use:   "delete claim NAME",
		Short: "End a claim by hand: cancelled if pending, scaled down if booting or ready",
		Args:  cobra.ExactArgs(2),
		ValidArgsFunction: func(cmd *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return []string{"claim"}, cobra.ShellCompDirectiveNoFileComp
			}
			return completeNames(cmd.Context(), o, "claims")
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if k, err := resource(args[0]); err != nil || k != "claims" {
				return fmt.Errorf("delete %s: only claims are deleted (`delete claim NAME`)", args[0])
			}
			c, err := o.Client()
			if err != nil {
				return err
			}
			r, err := c.DeleteClaim(cmd.Context(), args[1], rest.CommandRequest{By: by})
			if err != nil {
				return err
			}
			printResult(cmd.OutOrStdout(), "delete claim", r)
			return nil
		},
	}
	o.Bind(cmd, false)
	cmd.Flags().StringVar(&by, "by", defaultBy(), "who asks")
	return cmd
}

// localToken is the token a local `serve` generated under its default data
// dir, for a server on this machine's loopback: a newcomer's CLI works with
// no configuration.
func localToken(server string) string {
	if server != DefaultServer && !strings.Contains(server, "127.0.0.1") && !strings.Contains(server, "localhost") {
		return ""
	}
	path := localTokenFile()
	if path == "" {
		return ""
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
