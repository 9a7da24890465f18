package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/claimstream/claimstream/provider/rest"
)

// watchViews is `get -w`: after the first listing it follows the REST API's
// event stream from the listing's sequence and, after each event, prints
// the rows (or objects) that changed since they were last printed, as
// kubectl's watch does. A row that leaves the views (a collected claim) is
// not printed. Like `events --follow` it reconnects when serve goes away;
// it returns when ctx ends or the server refuses the request.
func watchViews(ctx context.Context, w, stderr io.Writer, c *rest.Client, out viewsOutput, kind string, first views, names []string, f listFilter) error {
	seen := map[string]string{}
	remember := func(v views) []views {
		var changed []views
		for _, one := range splitViews(v, names) {
			name, key := one.key()
			if seen[name] != key {
				seen[name] = key
				changed = append(changed, one)
			}
		}
		return changed
	}
	remember(first)
	seq := first.Seq
	if seq == 0 {
		// A listing of named items carries no sequence: take the list's.
		l, err := fetch(ctx, c, kind, nil, f)
		if err != nil {
			return err
		}
		seq = l.Seq
	}
	rowOut := out
	rowOut.noHeaders = true
	// The follower of `events --follow`: a restart of serve is survived.
	fl := &follower{c: c, stderr: stderr}
	err := fl.events(ctx, rest.EventQuery{From: seq + 1, Follow: true}, func(e rest.Event) error {
		v, err := fetchAtLeast(ctx, c, kind, e.Seq, f)
		if err != nil {
			return err
		}
		for _, one := range remember(v) {
			if err := printViews(w, rowOut, kind, one, out.format != "table" && out.format != "wide", serverNow(c)); err != nil {
				return err
			}
		}
		return nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("watch: %w", err)
}

// fetchAtLeast lists kind once the views have folded seq: the event stream
// can run ahead of the views for a moment (bounded: 5s, then what is there).
func fetchAtLeast(ctx context.Context, c *rest.Client, kind string, seq uint64, f listFilter) (views, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := fetch(ctx, c, kind, nil, f)
		if err != nil || v.Seq >= seq || time.Now().After(deadline) {
			return v, err
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return v, ctx.Err()
		case <-t.C:
		}
	}
}

// splitViews is one views per item, only the named ones when names are given.
func splitViews(v views, names []string) []views {
	var out []views
	keep := func(n string) bool { return len(names) == 0 || slices.Contains(names, n) }
	for _, g := range v.Groups {
		if keep(g.Name) {
			out = append(out, views{Seq: v.Seq, Groups: []rest.Group{g}})
		}
	}
	for _, s := range v.Slots {
		if keep(s.Name) {
			out = append(out, views{Seq: v.Seq, Slots: []rest.Slot{s}})
		}
	}
	for _, c := range v.Claims {
		if keep(c.Name) {
			out = append(out, views{Seq: v.Seq, Claims: []rest.Claim{c}})
		}
	}
	return out
}

// key is the item's name and its content, to tell a change. The item's
// own sequence moves with every event of its aggregate, so it is what
// changes first; the whole object is compared.
func (v views) key() (string, string) {
	var name string
	var obj any
	switch {
	case len(v.Groups) == 1:
		name, obj = "group/"+v.Groups[0].Name, v.Groups[0]
	case len(v.Slots) == 1:
		name, obj = "slot/"+v.Slots[0].Name, v.Slots[0]
	case len(v.Claims) == 1:
		name, obj = "claim/"+v.Claims[0].Name, v.Claims[0]
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return name, errors.New("unencodable").Error()
	}
	return name, string(b)
}
