package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// backupOfScript is a backup file, taken with the CLI, of the scripted
// history, and the digest of the views it was taken from.
func backupOfScript(t *testing.T) (path, digest string) {
	t.Helper()
	f := resttest.Scripted(t)
	path = filepath.Join(t.TempDir(), "pool.backup")
	if out := runCLI(t, f, "backup", path); strings.Contains(out, "error:") {
		t.Fatalf("backup: %s", out)
	}
	var err error
	f.H.Read(func(s *projections.State) { digest, err = projections.ViewsDigest(s) })
	if err != nil {
		t.Fatal(err)
	}
	return path, digest
}

func TestBackupThenRestoreGivesTheSameViews(t *testing.T) {
	path, want := backupOfScript(t)
	dir := filepath.Join(t.TempDir(), "restored")
	out := runCLI(t, nil, "restore", path, "--data-dir", dir)
	if !strings.Contains(out, "matches the backup") || !strings.Contains(out, want) {
		t.Fatalf("restore said %q, want the digest %s matched", out, want)
	}
	// serve's start on the restored dir: the same log, the same views.
	emb, err := events.StartEmbedded(events.EmbeddedConfig{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := events.OpenStore(ctx, js, events.StoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	runner := projections.NewRunner(st, projections.RunnerOptions{})
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var got string
	runner.Read(func(s *projections.State) { got, err = projections.ViewsDigest(s) })
	if err != nil || got != want {
		t.Fatalf("views after start on the restored dir: %s (%v), want %s", got, err, want)
	}
}

func TestRestoreRefuses(t *testing.T) {
	path, _ := backupOfScript(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(b []byte) string {
		p := filepath.Join(t.TempDir(), "damaged.backup")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	truncated := write(orig[:len(orig)-10])
	flipped := bytes.Clone(orig)
	flipped[len(flipped)/3] ^= 0x40
	flippedPath := write(flipped)

	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	locked := eventstest.StartServer(t)

	cases := []struct {
		name, file, dir, want string
	}{
		{"non-empty dir", path, nonEmpty, "is not empty"},
		{"locked dir", path, locked.Dir, "is in use"},
		{"truncated file", truncated, t.TempDir(), "end marker is missing"},
		{"flipped bytes", flippedPath, t.TempDir(), "checksum does not match"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := listDir(t, c.dir)
			out := runCLI(t, nil, "restore", c.file, "--data-dir", c.dir)
			if !strings.Contains(out, "error:") || !strings.Contains(out, c.want) {
				t.Fatalf("restore said %q, want an error with %q", out, c.want)
			}
			if after := listDir(t, c.dir); after != before {
				t.Fatalf("the dir changed: %q, was %q", after, before)
			}
		})
	}
}

func listDir(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, ",")
}

func TestBackupCutShortLeavesNoFile(t *testing.T) {
	path, _ := backupOfScript(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "cut.backup")
	var stderr bytes.Buffer
	err = runBackup(context.Background(), target, &stderr, func(_ context.Context, w io.Writer) (int64, error) {
		n, err := w.Write(orig[:len(orig)/2]) // the server died half way
		return int64(n), err
	})
	if err == nil || !strings.Contains(err.Error(), "damaged or incomplete") {
		t.Fatalf("backup of a cut transfer: %v", err)
	}
	if entries := listDir(t, filepath.Dir(target)); entries != "" {
		t.Fatalf("left behind: %s", entries)
	}
}
