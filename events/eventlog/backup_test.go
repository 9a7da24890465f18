package eventlog_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/projections"
	"github.com/nats-io/nats.go/jetstream"
)

func digestAt(st *eventlog.Store) eventlog.DigestAt {
	return func(ctx context.Context, seq uint64) (string, error) {
		views := projections.NewState()
		if seq > 0 {
			var err error
			if views, err = projections.Rebuild(ctx, st, seq); err != nil {
				return "", err
			}
		}
		return projections.ViewsDigest(views)
	}
}

// writeBackupFile backs st's log up to a file in a temp dir.
func writeBackupFile(t *testing.T, srv *eventstest.Server, st *eventlog.Store) (string, eventlog.BackupManifest) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log.backup")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := eventlog.WriteBackup(context.Background(), srv.Conn, st.Stream(), f, digestAt(st), nil)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	return path, m
}

// restoreInto restores the file into a fresh server and opens its store.
func restoreInto(t *testing.T, path string) (*eventlog.Store, *eventstest.Server) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := eventlog.VerifyBackup(f)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	srv := eventstest.StartServer(t)
	if err := eventlog.RestoreBackup(context.Background(), srv.Conn, f, m); err != nil {
		t.Fatalf("restore: %v", err)
	}
	return srv.Store(), srv
}

func TestBackupDuringAppendsRestoresIdenticalViews(t *testing.T) {
	st, srv := eventstest.NewStore(t)
	ctx := context.Background()
	for i := range 200 {
		if _, err := st.Append(ctx, events.SlotAggregate(fmt.Sprintf("pre-%d", i)), 0, eventstest.Created(fmt.Sprintf("pre-%d", i), fmt.Sprintf("c%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// A burst of appends runs while the backup is taken.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var appended atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			slot := fmt.Sprintf("burst-%d", i)
			if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, eventstest.Created(slot, "b"+slot)); err != nil {
				t.Errorf("append during backup: %v", err)
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
	ackedBefore, err := st.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path, m := writeBackupFile(t, srv, st)
	close(stop)
	wg.Wait()
	if m.LastSeq < ackedBefore {
		t.Fatalf("backup ends at seq %d, before seq %d acknowledged before it started", m.LastSeq, ackedBefore)
	}
	after, _ := st.LastSeq(ctx)
	if after <= m.LastSeq {
		t.Logf("no append landed after the snapshot's start (last %d)", after)
	}
	want, err := digestAt(st)(ctx, m.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	if m.ViewsDigest != want {
		t.Fatalf("manifest digest %s, views at seq %d %s", m.ViewsDigest, m.LastSeq, want)
	}

	restored, _ := restoreInto(t, path)
	last, err := restored.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if last != m.LastSeq {
		t.Fatalf("restored log ends at %d, backup at %d", last, m.LastSeq)
	}
	got, err := digestAt(restored)(ctx, last)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("restored views digest %s, original at seq %d %s", got, m.LastSeq, want)
	}
	for seq := uint64(1); seq <= ackedBefore; seq++ {
		if _, err := restored.Get(ctx, seq); err != nil {
			t.Fatalf("seq %d, acknowledged before the backup, is missing from the restore: %v", seq, err)
		}
	}
}

func TestBackupOfEmptyLogRestores(t *testing.T) {
	st, srv := eventstest.NewStore(t)
	path, m := writeBackupFile(t, srv, st)
	if m.LastSeq != 0 || m.Msgs != 0 {
		t.Fatalf("manifest %+v of an empty log", m)
	}
	restored, _ := restoreInto(t, path)
	if last, err := restored.LastSeq(context.Background()); err != nil || last != 0 {
		t.Fatalf("restored last seq %d, %v", last, err)
	}
}

// A restore into a server whose stream exists (another replica's restore
// won the race) is refused with the server's code for it, which a caller
// tells from other failures with errors.Is.
func TestRestoreOverAnExistingStreamIsRaced(t *testing.T) {
	st, srv := eventstest.NewStore(t)
	path, _ := writeBackupFile(t, srv, st)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := eventlog.VerifyBackup(f)
	if err != nil {
		t.Fatal(err)
	}
	err = eventlog.RestoreBackup(context.Background(), srv.Conn, f, m)
	if !errors.Is(err, eventlog.ErrRestoreRaced) {
		t.Fatalf("restore over the existing stream: %v, want ErrRestoreRaced", err)
	}
	if errors.Is(err, eventlog.ErrRestoreStalled) || errors.Is(err, eventlog.ErrRestoreNoPeers) {
		t.Fatalf("restore over the existing stream: %v is taken for a stall or a missing peer", err)
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != 10130 {
		t.Fatalf("restore over the existing stream: %v, want the server's APIError 10130", err)
	}
}

func TestVerifyBackupRefusesDamage(t *testing.T) {
	st, srv := eventstest.NewStore(t)
	ctx := context.Background()
	for i := range 50 {
		slot := fmt.Sprintf("node-%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(slot), 0, eventstest.Created(slot, "c"+slot)); err != nil {
			t.Fatal(err)
		}
	}
	path, _ := writeBackupFile(t, srv, st)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage := map[string]func([]byte) []byte{
		"truncated":              func(b []byte) []byte { return b[:len(b)-1] },
		"truncated-in-snapshot":  func(b []byte) []byte { return b[:len(b)/2] },
		"flipped-snapshot-byte":  func(b []byte) []byte { b[40] ^= 0xff; return b },
		"flipped-manifest-byte":  func(b []byte) []byte { b[len(b)-100] ^= 0x01; return b },
		"flipped-trailer-length": func(b []byte) []byte { b[len(b)-48] ^= 0x01; return b },
		"not-a-backup":           func(b []byte) []byte { b[0] = 'X'; return b },
		"empty":                  func(b []byte) []byte { return nil },
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "damaged")
			if err := os.WriteFile(p, fn(bytes.Clone(orig)), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := eventlog.VerifyBackup(f); !errors.Is(err, eventlog.ErrBadBackup) {
				t.Fatalf("verify of a %s file: %v, want ErrBadBackup", name, err)
			}
		})
	}
}

func FuzzReadBackupManifest(f *testing.F) {
	good := goodBackupBytes(f)
	f.Add(good)
	f.Add(good[:len(good)-3])
	f.Add([]byte("CLAIMSTREAM-BACKUP\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := eventlog.ReadBackupManifest(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if !errors.Is(err, eventlog.ErrBadBackup) {
				t.Fatalf("error not ErrBadBackup: %v", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("accepted an invalid manifest: %v", err)
		}
	})
}

// goodBackupBytes is a whole backup of a small log.
func goodBackupBytes(t testing.TB) []byte {
	st, srv := eventstest.NewStore(t)
	ctx := context.Background()
	if _, err := st.Append(ctx, events.SlotAggregate("node-1"), 0, eventstest.Created("node-1", "c1")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := eventlog.WriteBackup(ctx, srv.Conn, st.Stream(), &buf, digestAt(st), nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A single server's backup restores onto a cluster's three replicas at
// once: every server holds the whole log when the restore answers, and
// the rest of the stream's configuration is the backup's.
func TestASingleServersBackupRestoresOntoThreeReplicas(t *testing.T) {
	st, srv := eventstest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		if _, err := st.Append(ctx, events.SlotAggregate(name), 0, events.Event{Time: time.Now(), Data: events.SlotDeclared{Ref: events.Ref{Slot: name, Group: "g", Cause: "test"}, Spec: events.SlotSpec{ProviderID: "homelab://" + name}}}); err != nil {
			t.Fatal(err)
		}
	}
	path, m := writeBackupFile(t, srv, st)
	if _, err := m.WithReplicas(3); err != nil {
		t.Fatal(err)
	}
	bad := m
	bad.Config = []byte(`[]`)
	if _, err := bad.WithReplicas(3); !errors.Is(err, eventlog.ErrBadBackup) {
		t.Fatalf("replicas set on a configuration that is not an object: %v, want ErrBadBackup", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := eventstest.StartCluster(t, 3)
	c.WaitForMetaLeader()
	three, err := m.WithReplicas(3)
	if err != nil {
		t.Fatal(err)
	}
	// Right after forming, a cluster may not know its peers yet.
	eventstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		err := eventlog.RestoreBackup(ctx, c.Servers[1].Conn, f, three)
		if errors.Is(err, eventlog.ErrRestoreNoPeers) {
			return err
		}
		if err != nil {
			t.Fatalf("restore onto the cluster: %v", err)
		}
		return nil
	})
	info, err := c.JetStream(0).Stream(ctx, st.Stream())
	if err != nil {
		t.Fatal(err)
	}
	cfg := info.CachedInfo().Config
	if cfg.Replicas != 3 || !cfg.DenyDelete || !cfg.DenyPurge || !cfg.AllowDirect {
		t.Fatalf("restored stream: %d replicas, deny delete %v, deny purge %v, direct %v; want 3 and the backup's settings", cfg.Replicas, cfg.DenyDelete, cfg.DenyPurge, cfg.AllowDirect)
	}
	c.WaitStreamStored(st.Stream(), m.LastSeq)
}
