package eventlog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
)

// BenchmarkBackupRestore measures a backup of a 100,000-event log (the
// snapshot and the views' digest at its end) and its restore (the file's
// check, the JetStream restore, the views' rebuild and digest, and the one
// fsync of the whole store after the server stops, as `claimstream restore`
// runs it).
//
//	go test ./events/eventlog -run '^$' -bench BackupRestore -benchtime 1x -count 3
func BenchmarkBackupRestore(b *testing.B) {
	const n = 100_000
	st, srv := eventstest.NewStore(b)
	ctx := context.Background()
	last := make([]uint64, 1000)
	for i := range n {
		k := i % 1000
		slot := fmt.Sprintf("node-%d", k)
		res, err := st.Append(ctx, events.SlotAggregate(slot), last[k], eventstest.Created(slot, fmt.Sprintf("c%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		last[k] = res.Last
	}
	path := filepath.Join(b.TempDir(), "log.backup")
	var m eventlog.BackupManifest
	b.Run("backup", func(b *testing.B) {
		for range b.N {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if m, err = eventlog.WriteBackup(ctx, srv.Conn, st.Stream(), f, digestAt(st), nil); err != nil {
				b.Fatal(err)
			}
			if err := f.Close(); err != nil {
				b.Fatal(err)
			}
		}
		fi, _ := os.Stat(path)
		b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/backup")
	})
	b.Run("restore", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			dst := eventstest.StartServer(b)
			b.StartTimer()
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			vm, err := eventlog.VerifyBackup(f)
			if err != nil {
				b.Fatal(err)
			}
			if err := eventlog.RestoreBackup(ctx, dst.Conn, f, vm); err != nil {
				b.Fatal(err)
			}
			f.Close()
			got, err := digestAt(dst.Store())(ctx, vm.LastSeq)
			if err != nil || got != m.ViewsDigest {
				b.Fatalf("restored digest %s (%v), want %s", got, err, m.ViewsDigest)
			}
			dst.Stop()
			if err := natsserver.SyncDataDir(dst.Dir); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/restore")
	})
}
