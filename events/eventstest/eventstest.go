// Package eventstest starts real embedded JetStream servers for tests, in
// the manner of nats-server's own test helpers.
package eventstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
)

// Server is an embedded server on a test's temp dir that can be restarted
// on the same store.
type Server struct {
	t   testing.TB
	Dir string
	*events.Embedded
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

func (s *Server) start() {
	s.t.Helper()
	e, err := events.StartEmbedded(events.EmbeddedConfig{Dir: s.Dir, NoSync: s.NoSync})
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

// Store opens the event store on the server.
func (s *Server) Store() *events.Store {
	s.t.Helper()
	js, err := jetstream.New(s.Conn)
	if err != nil {
		s.t.Fatalf("jetstream: %v", err)
	}
	st, err := events.OpenStore(context.Background(), js, events.StoreConfig{})
	if err != nil {
		s.t.Fatalf("open store: %v", err)
	}
	return st
}

// NewStore starts a server and opens a store on it.
func NewStore(t testing.TB) (*events.Store, *Server) {
	t.Helper()
	s := StartServer(t)
	return s.Store(), s
}

// CheckFor polls fn every sleep until it returns nil or total passes, then
// fails the test with fn's last error. Use it instead of sleeping.
func CheckFor(t testing.TB, total, sleep time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	var err error
	for time.Now().Before(deadline) {
		if err = fn(); err == nil {
			return
		}
		time.Sleep(sleep)
	}
	t.Fatalf("condition not met after %v: %v", total, err)
}
