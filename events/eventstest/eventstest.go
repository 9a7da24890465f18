// Package eventstest starts real embedded JetStream servers for tests, in
// the manner of nats-server's own test helpers.
package eventstest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/schemas"
)

// Server is an embedded server on a test's temp dir that can be restarted
// on the same store.
type Server struct {
	t   testing.TB
	Dir string
	*natsserver.Embedded
	NoSync bool
}

// StartServer starts an embedded JetStream server in a fresh temp dir. Tests
// turn fsync off: they exercise semantics, not the disk.
func StartServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, Dir: t.TempDir(), NoSync: true}
	s.start()
	t.Cleanup(func() {
		if s.Embedded != nil {
			s.Shutdown()
		}
	})
	return s
}

// StartServerOn starts an embedded server on an existing store dir (one a
// stopped serve or a restore left), shut down when the test ends.
func StartServerOn(t testing.TB, dir string) *Server {
	t.Helper()
	s := &Server{t: t, Dir: dir, NoSync: true}
	s.start()
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start() {
	s.t.Helper()
	e, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: s.Dir, NoSync: s.NoSync})
	if err != nil {
		s.t.Fatalf("start embedded nats: %v", err)
	}
	s.Embedded = e
}

// Restart stops the server and starts it again on the same store dir.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	s.Embedded = nil
	s.start()
}

// Stop shuts the server down and leaves its store dir, so a test can
// damage the files before Start.
func (s *Server) Stop() {
	s.t.Helper()
	if s.Embedded != nil {
		s.Shutdown()
		s.Embedded = nil
	}
}

// Start starts a stopped server again on the same store dir.
func (s *Server) Start() {
	s.t.Helper()
	if s.Embedded == nil {
		s.start()
	}
}

// Store opens the event store on the server.
func (s *Server) Store() *eventlog.Store {
	s.t.Helper()
	js, err := jetstream.New(s.Conn)
	if err != nil {
		s.t.Fatalf("jetstream: %v", err)
	}
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{})
	if err != nil {
		s.t.Fatalf("open store: %v", err)
	}
	return st
}

// NewStore starts a server and opens a store on it.
func NewStore(t testing.TB) (*eventlog.Store, *Server) {
	t.Helper()
	s := StartServer(t)
	st := s.Store()
	t.Cleanup(func() {
		if s.Embedded != nil {
			ValidateLog(t, st)
		}
	})
	return st, s
}

// CheckFor polls fn every interval until it returns nil or total passes,
// then fails the test with fn's last error, which should name what was
// awaited. It is the suite's one bounded wait for a condition: use it
// instead of sleeping. fn runs on the caller's goroutine, at once and then
// on each tick; one more try is made at the deadline.
func CheckFor(t testing.TB, total, interval time.Duration, fn func() error) {
	t.Helper()
	err := fn()
	if err == nil {
		return
	}
	tick := time.NewTicker(max(interval, time.Millisecond))
	defer tick.Stop()
	deadline := time.NewTimer(total)
	defer deadline.Stop()
	for {
		select {
		case <-tick.C:
		case <-deadline.C:
			if err = fn(); err == nil {
				return
			}
			t.Fatalf("condition not met after %v: %v", total, err)
		}
		if err = fn(); err == nil {
			return
		}
	}
}

// ValidateLog checks every event of the store's log against the JSON Schema
// of its type (schemas/events), and fails the test on an entry that does not
// decode or does not validate. Stores opened by this package and by the
// handler harness run it when the test ends, so every event a test produces
// is validated.
func ValidateLog(t testing.TB, st *eventlog.Store) {
	t.Helper()
	n := 0
	// Events before the first expired (a test of retention): not damage.
	first := uint64(1)
	if b, err := st.Bounds(context.Background()); err == nil {
		first = b.First
	}
	err := st.Read(context.Background(), first, 0, func(e events.Event) error {
		if e.Data == nil {
			return nil // a test that writes bad entries on purpose
		}
		body, err := json.Marshal(e.Data)
		if err != nil {
			return err
		}
		if err := schemas.ValidateEvent(string(e.Type), body); err != nil {
			t.Errorf("seq %d: event does not match its schema: %v", e.Seq, err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Errorf("validate log: %v", err)
	}
}
