package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/internal/cli"
	"github.com/claimstream/claimstream/projections"
)

// newBackupCmd is `claimstream backup FILE`: the running serve streams a
// backup of its log (GET /api/v1/backup); the file is checked whole before
// it takes its name, so FILE is either a good backup or absent.
func newBackupCmd() *cobra.Command {
	var o cli.Options
	var force bool
	cmd := &cobra.Command{
		Use:   "backup FILE [--force]",
		Short: "Write a backup of the event log of a running serve to FILE",
		Long: "Write a backup of the event log of a running serve to FILE, consistent while it goes on\n" +
			"appending: the JetStream snapshot of the log up to its last event at the start, and a\n" +
			"manifest with the views' digest there. Progress goes to stderr; restore with\n" +
			"`claimstream restore FILE --data-dir DIR`. An existing FILE is refused unless --force\n" +
			"(it is then replaced only once the new backup is checked whole).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.Client()
			if err != nil {
				return err
			}
			return runBackup(cmd.Context(), args[0], force, cmd.ErrOrStderr(), func(ctx context.Context, w io.Writer) (int64, error) {
				return c.Backup(ctx, w)
			})
		},
	}
	o.Bind(cmd, false)
	cmd.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return cmd
}

// runBackup writes the backup fetch streams to file. Without force an
// existing file is refused before anything is fetched, and the finished
// backup takes the name by a hard link, which fails rather than replace a
// file that appeared meanwhile.
func runBackup(ctx context.Context, file string, force bool, stderr io.Writer, fetch func(context.Context, io.Writer) (int64, error)) error {
	start := time.Now()
	if !force {
		if _, err := os.Lstat(file); err == nil {
			return fmt.Errorf("backup: %s exists: give another FILE, or --force to replace it", file)
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("backup: %w", err)
		}
	}
	part, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".partial-*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer os.Remove(part.Name()) // gone once renamed
	defer part.Close()
	if _, err := fetch(ctx, &progressWriter{w: part, out: stderr}); err != nil {
		return err
	}
	if err := part.Sync(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	m, err := eventlog.VerifyBackup(part)
	if err != nil {
		return fmt.Errorf("backup arrived damaged or incomplete, nothing written to %s: %w", file, err)
	}
	if err := part.Close(); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if err := place(part.Name(), file, force); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "backup %s: stream %s, sequences %d..%d, %d events, %s, views digest %s, %v\n",
		file, m.Stream, m.FirstSeq, m.LastSeq, m.Msgs, mib(m.SnapshotSize), m.ViewsDigest, time.Since(start).Round(time.Millisecond))
	return nil
}

// place gives the checked backup its name: a rename with force, else a
// hard link that refuses an existing name.
func place(part, file string, force bool) error {
	if force {
		if err := os.Rename(part, file); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
		return nil
	}
	if err := os.Link(part, file); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("backup: %s appeared while the backup was taken: nothing replaced; give another FILE, or --force", file)
		}
		return fmt.Errorf("backup: %w", err)
	}
	return nil
}

// progressWriter tells stderr every 8 MiB received.
type progressWriter struct {
	w        io.Writer
	out      io.Writer
	n, shown int64
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if p.n-p.shown >= 8<<20 {
		p.shown = p.n
		fmt.Fprintf(p.out, "backup: %s received\n", mib(p.n))
	}
	return n, err
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// newRestoreCmd is `claimstream restore FILE --data-dir DIR`: offline, into
// an empty data dir, through the JetStream restore API of an embedded
// server started on DIR; then the restored log is checked against the
// manifest (sequences, events, views' digest).
func newRestoreCmd() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "restore FILE --data-dir DIR",
		Short: "Restore a backup file into an empty data dir (serve stopped)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" {
				return errors.New("restore: --data-dir is required")
			}
			return runRestore(cmd.Context(), args[0], dataDir, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the empty data dir to restore into (serve's --data-dir)")
	return cmd
}

func runRestore(ctx context.Context, file, dataDir string, out io.Writer) error {
	start := time.Now()
	if err := natsserver.CheckRestoreTarget(dataDir); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer f.Close()
	m, err := eventlog.VerifyBackup(f)
	if err != nil {
		return fmt.Errorf("restore refused, nothing written: %w", err)
	}
	// No fsync per event: the store is synced once, whole, at the end.
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dataDir, NoSync: true})
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	digest, err := restoreAndCheck(ctx, emb, f, m)
	emb.Shutdown()
	if err == nil {
		err = natsserver.SyncDataDir(dataDir)
	}
	if err != nil {
		// The dir was empty: what is in it now is this restore's.
		if cerr := clearDir(dataDir); cerr != nil {
			err = fmt.Errorf("%w; and removing the partial restore failed: %v", err, cerr)
		}
		return err
	}
	fmt.Fprintf(out, "restored %s into %s: stream %s, sequences %d..%d, %d events, views digest %s (matches the backup), %v\n",
		file, dataDir, m.Stream, m.FirstSeq, m.LastSeq, m.Msgs, digest, time.Since(start).Round(time.Millisecond))
	return nil
}

// restoreAndCheck restores the verified backup on emb and checks the
// restored log against its manifest; it returns the views' digest.
func restoreAndCheck(ctx context.Context, emb *natsserver.Embedded, f *os.File, m eventlog.BackupManifest) (string, error) {
	if err := eventlog.RestoreBackup(ctx, emb.Conn, f, m); err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	stream, err := js.Stream(ctx, m.Stream)
	if err != nil {
		return "", fmt.Errorf("restore: the restored stream: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("restore: the restored stream: %w", err)
	}
	if s := info.State; s.LastSeq != m.LastSeq || s.Msgs != m.Msgs {
		return "", fmt.Errorf("restore: the restored stream holds %d events up to seq %d, the backup %d up to %d", s.Msgs, s.LastSeq, m.Msgs, m.LastSeq)
	}
	store, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{Stream: m.Stream})
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	views := projections.NewState()
	if m.LastSeq > 0 {
		if views, err = projections.Rebuild(ctx, store, m.LastSeq); err != nil {
			return "", fmt.Errorf("restore: rebuild the views: %w", err)
		}
	}
	digest, err := projections.ViewsDigest(views)
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	if digest != m.ViewsDigest {
		return "", fmt.Errorf("restore: the views rebuilt from the restored log have digest %s, the backup's were %s", digest, m.ViewsDigest)
	}
	return digest, nil
}

// clearDir removes everything in dir, leaving dir.
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
