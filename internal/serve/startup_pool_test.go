package serve

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// The pool file loads while the plane starts, yet an invalid one still
// stops serve before any event is written or any listener opened: the
// error names the file, line and field, and the log is empty.
func TestServeWithAnInvalidPoolFileWritesNothing(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "pool.yaml")
	writeFile(t, bad, "groups:\n  - name: Bad_Name\n    minSize: -1\n")
	dir := t.TempDir()
	grpcAddr := freeAddr(t)
	err := runServe(context.Background(), serveOptions{config: bad, dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn",
		grpcAddress: grpcAddr, plaintext: true})
	if err == nil || !strings.Contains(err.Error(), "pool.yaml:2") || !strings.Contains(err.Error(), "minSize") {
		t.Fatalf("got %v, want an error naming the file, line and field", err)
	}
	// The provider's port was never taken.
	l, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		t.Fatalf("the provider's address is taken after the refusal: %v", err)
	}
	l.Close()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Shutdown()
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{Stream: "CLAIMSTREAM"})
	if err != nil {
		t.Fatal(err)
	}
	if last, err := st.LastSeq(context.Background()); err != nil || last != 0 {
		t.Fatalf("the log holds %d events after the refusal (%v)", last, err)
	}
}

// The pool file parsed at start is handed to the first term and then held
// by nothing: the load and the handoff keep no reference, so once the
// term has applied it the collector frees it.
func TestThePoolFileParsedAtStartIsLetGoOnceTaken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pool.yaml")
	writeFile(t, path, "groups:\n  - name: g\n    maxSize: 1\nslots:\n  - name: s0\n    group: g\n")
	load := loadPoolAsync(path, loadPool)
	cfg, err := load.wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	parsed := weak.Make(cfg)
	pending := newPendingPool(cfg)
	cfg = nil
	taken := pending.take()
	if taken == nil || len(taken.Slots) != 1 {
		t.Fatalf("the first take got %+v, want the parsed file", taken)
	}
	if again := pending.take(); again != nil {
		t.Fatal("a second take got the parsed file again")
	}
	taken = nil
	runtime.GC()
	if parsed.Value() != nil {
		t.Fatal("the parsed pool file is still held after it was taken")
	}
	runtime.KeepAlive(load)
	runtime.KeepAlive(pending)
}

// The views are built only once the pool file's parse has ended: the
// parse and the snapshot's load are a large start's two largest heaps.
// Here the parse ends once the start has opened the snapshot bucket (its
// last step before the views), appending an event to the log as it ends:
// views built after it hold that event.
func TestViewsAreBuiltOnceThePoolFileIsParsed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opened := make(chan *eventlog.Store, 1)
	release := make(chan struct{})
	var marker uint64
	parse := func(string) (*pool.Config, error) {
		var st *eventlog.Store
		select {
		case st = <-opened:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		res, err := st.Append(ctx, events.SlotAggregate("during-parse"), 0, eventstest.Created("during-parse", "c1"))
		if err != nil {
			return nil, err
		}
		marker = res.Last
		return nil, errors.New("not a pool file: the test's parse")
	}
	logs := &logcapture.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	o := serveOptions{dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true,
		timing:      newStartupTimer(log, clock.RealClock{}),
		poolFile:    loadPoolAsync("pool.yaml", parse),
		storeOpened: func(st *eventlog.Store) { opened <- st }}
	type started struct {
		p   *plane
		err error
	}
	done := make(chan started, 1)
	go func() {
		p, err := startPlane(ctx, o, log, nil, nil)
		done <- started{p, err}
	}()
	eventstest.CheckFor(t, 30*time.Second, 5*time.Millisecond, func() error {
		if !strings.Contains(logs.String(), `phase="snapshot bucket opened"`) {
			return errors.New("the snapshot bucket is not open yet")
		}
		return nil
	})
	close(release)
	s := <-done
	if s.err != nil {
		t.Fatal(s.err)
	}
	t.Cleanup(s.p.emb.Shutdown)
	if _, err := o.poolFile.wait(ctx); err == nil || !strings.Contains(err.Error(), "the test's parse") {
		t.Fatalf("the parse's outcome: %v", err)
	}
	if got := s.p.views.Seq(); got < marker {
		t.Fatalf("the views were built at seq %d, before the parse ended with seq %d in the log", got, marker)
	}
}
