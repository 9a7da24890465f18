package rest_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

func TestBackupEndpointRestoresTheSameViews(t *testing.T) {
	f := resttest.Scripted(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.backup")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Client.Backup(ctx, out); err != nil {
		t.Fatalf("backup: %v", err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	m, err := eventlog.VerifyBackup(in)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	last, err := f.H.Store.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.LastSeq != last || m.Stream != f.H.Store.Stream() {
		t.Fatalf("manifest %s up to %d, the log %s up to %d", m.Stream, m.LastSeq, f.H.Store.Stream(), last)
	}
	var live string
	f.H.Read(func(s *projections.State) { live, err = projections.ViewsDigest(s) })
	if err != nil {
		t.Fatal(err)
	}
	if m.ViewsDigest != live {
		t.Fatalf("manifest digest %s, live views %s", m.ViewsDigest, live)
	}

	srv := eventstest.StartServer(t)
	if err := eventlog.RestoreBackup(ctx, srv.Conn, in, m); err != nil {
		t.Fatalf("restore: %v", err)
	}
	st, err := projections.Rebuild(ctx, srv.Store(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := projections.ViewsDigest(st); got != live {
		t.Fatalf("restored views digest %s, original %s", got, live)
	}
}

func TestBackupEndpointNeedsTheToken(t *testing.T) {
	f := resttest.Start(t)
	c := &rest.Client{BaseURL: f.Server.URL, Token: "wrong"}
	var apiErr *rest.APIError
	if _, err := c.Backup(context.Background(), new(discard)); !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized {
		t.Fatalf("backup with a wrong token: %v, want 401", err)
	}
}

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
