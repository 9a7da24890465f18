package serve

import (
	"context"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
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
