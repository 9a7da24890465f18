package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
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
	st := eventstest.StartServerOn(t, dir).Store()
	ctx := context.Background()
	runner := projections.NewRunner(st, projections.RunnerOptions{})
	if err := runner.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var got string
	var err error
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
	err = runBackup(context.Background(), target, false, &stderr, func(_ context.Context, w io.Writer) (int64, error) {
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

// TestServeBackupDuringAppends: serve's own API streams the backup while
// appends go on; the restored dir starts with the views the log had at the
// backup's last sequence, and holds every event acknowledged before it.
func TestServeBackupDuringAppends(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log, _ := newLogger("error", "text")
	o := serveOptions{config: examplePool, configPoll: time.Hour, dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true,
		apiAddress: "127.0.0.1:0", apiToken: "backup-test-token-0123456789abcdef"}
	p, err := startPlane(ctx, o, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.emb.Shutdown()
	go func() { _ = p.views.Run(ctx) }()
	cfg, err := loadPool(o.config)
	if err != nil {
		t.Fatal(err)
	}
	leadNow(t, ctx, p)
	if err := p.applyPool(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	h, err := p.apiHandler(o)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	defer api.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var appended atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Operators decommission and recommission a slot over and over:
		// every command appends events the views fold.
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var cmd decide.Command = decide.Decommission{Slot: "node-1.lan", By: "test", Reason: fmt.Sprint("round ", i)}
			if i%2 == 1 {
				cmd = decide.Recommission{Slot: "node-1.lan", By: "test"}
			}
			if _, err := p.service.Execute(ctx, cmd); err != nil {
				t.Errorf("%T during the backup: %v", cmd, err)
				return
			}
			appended.Add(1)
		}
	}()
	eventstest.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		if appended.Load() < 20 {
			return fmt.Errorf("%d appends so far", appended.Load())
		}
		return nil
	})
	ackedBefore, err := p.store.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "serve.backup")
	out := runCLI(t, nil, "backup", path, "--server", api.URL, "--token", "backup-test-token-0123456789abcdef", "--cli-config", "")
	close(stop)
	wg.Wait()
	if strings.Contains(out, "error:") {
		t.Fatalf("backup: %s", out)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := eventlog.VerifyBackup(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if m.LastSeq < ackedBefore {
		t.Fatalf("the backup ends at seq %d, before seq %d acknowledged before it started", m.LastSeq, ackedBefore)
	}
	end, _ := p.store.LastSeq(ctx)
	t.Logf("acknowledged before the backup: %d; the backup: up to %d; the log when the appends stopped: %d", ackedBefore, m.LastSeq, end)
	before, err := projections.Rebuild(ctx, p.store, m.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := projections.ViewsDigest(before)

	restored := filepath.Join(t.TempDir(), "restored")
	if out := runCLI(t, nil, "restore", path, "--data-dir", restored); !strings.Contains(out, "matches the backup") {
		t.Fatalf("restore: %s", out)
	}
	o2 := serveOptions{config: examplePool, configPoll: time.Hour, dataDir: restored, stream: "CLAIMSTREAM", noFsync: true}
	p2, err := startPlane(ctx, o2, log, nil, nil)
	if err != nil {
		t.Fatalf("serve on the restored dir: %v", err)
	}
	defer p2.emb.Shutdown()
	if last, err := p2.store.LastSeq(ctx); err != nil || last != m.LastSeq {
		t.Fatalf("the restored log ends at %d (%v), the backup at %d", last, err, m.LastSeq)
	}
	var got string
	p2.views.Read(func(s *projections.State) { got, err = projections.ViewsDigest(s) })
	if err != nil || got != want {
		t.Fatalf("views of serve on the restored dir: %s (%v), want %s (the original at seq %d)", got, err, want, m.LastSeq)
	}
}

// TestRestoreThatDoesNotMatchItsManifestLeavesTheDirEmpty: a file whose
// checksums hold but whose views digest is not what its log folds to (a
// backup written by a serve with another fold) is restored, found out and
// removed again.
func TestRestoreThatDoesNotMatchItsManifestLeavesTheDirEmpty(t *testing.T) {
	path, _ := backupOfScript(t)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const trailer = 8 + sha256.Size + 8
	n := int(binary.BigEndian.Uint64(b[len(b)-trailer:]))
	head := b[:len(b)-trailer-n]
	var m eventlog.BackupManifest
	if err := json.Unmarshal(b[len(b)-trailer-n:len(b)-trailer], &m); err != nil {
		t.Fatal(err)
	}
	m.ViewsDigest = strings.Repeat("ab", sha256.Size)
	mb, _ := json.Marshal(m)
	sum := sha256.Sum256(mb)
	forged := append(append([]byte{}, head...), mb...)
	forged = binary.BigEndian.AppendUint64(forged, uint64(len(mb)))
	forged = append(append(forged, sum[:]...), "CSBKEND1"...)
	forgedPath := filepath.Join(t.TempDir(), "forged.backup")
	if err := os.WriteFile(forgedPath, forged, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := runCLI(t, nil, "restore", forgedPath, "--data-dir", dir)
	if !strings.Contains(out, "error:") || !strings.Contains(out, "the backup's were "+m.ViewsDigest) {
		t.Fatalf("restore said %q, want the digest mismatch", out)
	}
	if left := listDir(t, dir); left != "" {
		t.Fatalf("a failed restore left %s behind", left)
	}
}

// An existing FILE is refused before anything is fetched, and kept; one
// that appears while the backup is taken is kept too; --force replaces it
// with the checked backup.
func TestBackupRefusesAnExistingFileUnlessForced(t *testing.T) {
	path, _ := backupOfScript(t)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "pool.backup")
	if err := os.WriteFile(target, []byte("last week's backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	fetched := 0
	fetch := func(_ context.Context, w io.Writer) (int64, error) {
		fetched++
		n, err := w.Write(good)
		return int64(n), err
	}
	var stderr bytes.Buffer
	err = runBackup(context.Background(), target, false, &stderr, fetch)
	if err == nil || !strings.Contains(err.Error(), "exists") || !strings.Contains(err.Error(), "--force") || fetched != 0 {
		t.Fatalf("backup over an existing file: %v (fetched %d times)", err, fetched)
	}
	if b, _ := os.ReadFile(target); string(b) != "last week's backup" {
		t.Fatalf("the existing file changed: %q", b)
	}
	// A file that appears while the backup streams is not replaced either.
	late := filepath.Join(dir, "late.backup")
	err = runBackup(context.Background(), late, false, &stderr, func(ctx context.Context, w io.Writer) (int64, error) {
		if err := os.WriteFile(late, []byte("someone else's"), 0o600); err != nil {
			return 0, err
		}
		return fetch(ctx, w)
	})
	if err == nil || !strings.Contains(err.Error(), "appeared") {
		t.Fatalf("a file that appeared meanwhile: %v", err)
	}
	if b, _ := os.ReadFile(late); string(b) != "someone else's" {
		t.Fatalf("the file that appeared was replaced")
	}
	if err := runBackup(context.Background(), target, true, &stderr, fetch); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, good) {
		t.Fatalf("--force did not write the backup")
	}
	if entries := listDir(t, dir); entries != "late.backup,pool.backup" {
		t.Fatalf("left behind: %s", entries)
	}
}
