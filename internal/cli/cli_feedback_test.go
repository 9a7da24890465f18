package cli

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// What -o name prints can be fed back: get and describe take KIND/NAME
// (one kind; mixed forms are refused, saying why).
func TestCLINamesFeedBack(t *testing.T) {
	f := resttest.Scripted(t)
	for _, kind := range []string{"slots", "claims", "groups"} {
		names := strings.Fields(runCLI(t, f, "get", kind, "-o", "name"))
		if len(names) < 2 || !strings.Contains(names[0], "/") {
			t.Fatalf("get %s -o name: %v", kind, names)
		}
		again := runCLI(t, f, append(append([]string{"get"}, names...), "-o", "name")...)
		if strings.Join(strings.Fields(again), " ") != strings.Join(names, " ") {
			t.Errorf("get %v -o name:\n%s\nwant %v", names, again, names)
		}
	}
	if a, b := runCLI(t, f, "describe", "slot/node-1.lan"), runCLI(t, f, "describe", "slot", "node-1.lan"); a != b || strings.HasPrefix(a, "error") {
		t.Errorf("describe slot/node-1.lan:\n%s\nwant\n%s", a, b)
	}
	for args, want := range map[string]string{
		"get slot/node-1.lan claim/x":  `every KIND/NAME must be of one kind`,
		"get slots slot/node-1.lan":    `give either KIND NAME... or KIND/NAME..., not both`,
		"get slot/node-1.lan node-2":   `want KIND/NAME`,
		"get pod/x":                    `unknown resource "pod"`,
		"describe slot/a slot/b":       `describe takes one slot`,
		"get slot/":                    `want KIND/NAME`,
		"describe slot node-1.lan x/y": `accepts between 1 and 2 arg(s)`,
	} {
		if out := runCLI(t, f, strings.Fields(args)...); !strings.Contains(out, "error: ") || !strings.Contains(out, want) {
			t.Errorf("%s: %q, want an error saying %q", args, out, want)
		}
	}
}

// events takes --no-headers, -o name (event/SEQ, which --from takes back)
// and -o jsonpath (one line per event); a reversed time range is refused,
// by the CLI and by the API.
func TestCLIEventsOutputsAndRange(t *testing.T) {
	f := resttest.Scripted(t)
	table := runCLI(t, f, "events")
	rows := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	if got := runCLI(t, f, "events", "--no-headers"); got != strings.Join(rows[1:], "\n")+"\n" {
		t.Errorf("events --no-headers:\n%s\nwant the table without its header", got)
	}
	names := strings.Fields(runCLI(t, f, "events", "-o", "name"))
	if len(names) != len(rows)-1 || names[0] != "event/1" {
		t.Fatalf("events -o name: %v (%d events in the table)", names, len(rows)-1)
	}
	from := strings.TrimPrefix(names[4], "event/")
	if got := strings.Fields(runCLI(t, f, "events", "--from", from, "-o", "name")); len(got) == 0 || got[0] != names[4] {
		t.Errorf("events --from %s -o name: %v", from, got)
	}
	types := strings.Split(strings.TrimSuffix(runCLI(t, f, "events", "-o", "jsonpath={.type}"), "\n"), "\n")
	if len(types) != len(names) || types[0] != "dev.claimstream.GroupDeclared.v1" {
		t.Errorf("events -o jsonpath={.type}: %q", types)
	}
	if out := runCLI(t, f, "events", "-o", "jsonpath={.x"); !strings.Contains(out, "error: -o jsonpath=") {
		t.Errorf("a bad template: %q", out)
	}
	later, earlier := handlerstest.Start.Add(time.Hour).Format(time.RFC3339), handlerstest.Start.Format(time.RFC3339)
	for _, args := range [][]string{{"events", "--since", later, "--until", earlier}, {"events", "export", "--since", later, "--until", earlier}} {
		if out := runCLI(t, f, args...); !strings.Contains(out, "error: --since "+later+" is after --until "+earlier+": the range is reversed") {
			t.Errorf("%v: %q", args, out)
		}
	}
	err := f.Client.Events(context.Background(), rest.EventQuery{Since: handlerstest.Start.Add(time.Hour), Until: handlerstest.Start}, func(rest.Event) error { return nil })
	var apiErr *rest.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(apiErr.Msg, "reversed") {
		t.Errorf("the API over a reversed range: %v", err)
	}
}
