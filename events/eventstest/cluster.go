package eventstest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/internal/freeport"
)

// ClusterPassword is the route secret of the clusters StartCluster makes.
const ClusterPassword = "test-route-secret"

// ClusterOptions tune StartClusterWith.
type ClusterOptions struct {
	// Access is every server's access control (the same on all, as serve
	// gives it).
	Access natsserver.Access
	// Listen opens each server's client port on loopback (for Access's
	// subscribers).
	Listen bool
	// Sync turns fsync on (tests run without it).
	Sync bool
}

// Cluster is n embedded servers on loopback joined by routes into one
// JetStream cluster, as n serve replicas are. Each server keeps its store
// dir across Stop and Start.
type Cluster struct {
	t       testing.TB
	opts    ClusterOptions
	routes  []string
	Servers []*ClusterServer
}

// ClusterServer is one replica of a Cluster.
type ClusterServer struct {
	Name  string
	Dir   string
	Route string // host:port of its route listener
	*natsserver.Embedded
}

// StartCluster starts n servers in a cluster and waits (bounded) until
// JetStream has a meta leader that every server knows. Every server is shut
// down when the test ends.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartClusterWith(t, n, ClusterOptions{})
}

// StartClusterWith is StartCluster with options.
func StartClusterWith(t testing.TB, n int, opts ClusterOptions) *Cluster {
	t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	return startCluster(t, dirs, opts)
}

// StartClusterOn starts a cluster of one server per store dir (a dir a
// single server left, say).
func StartClusterOn(t testing.TB, dirs []string) *Cluster {
	t.Helper()
	return startCluster(t, dirs, ClusterOptions{})
}

func startCluster(t testing.TB, dirs []string, opts ClusterOptions) *Cluster {
	t.Helper()
	n := len(dirs)
	c := &Cluster{t: t, opts: opts}
	for i := 0; i < n; i++ {
		addr := freeLoopbackPort(t)
		c.routes = append(c.routes, "nats-route://"+addr)
		c.Servers = append(c.Servers, &ClusterServer{Name: fmt.Sprintf("replica-%d", i), Dir: dirs[i], Route: addr})
	}
	t.Cleanup(c.Shutdown)
	// Started together: StartEmbedded returns once its own listeners are
	// up; the routes and the meta leader follow.
	errs := make(chan error, n)
	for i := range c.Servers {
		go func() { errs <- c.start(i) }()
	}
	for range c.Servers {
		if err := <-errs; err != nil {
			t.Fatalf("start cluster: %v", err)
		}
	}
	c.WaitForMetaLeader()
	return c
}

func freeLoopbackPort(t testing.TB) string {
	t.Helper()
	// Below the ephemeral range: the servers' own route connections take
	// ephemeral ports, and one could take a route port picked from ":0".
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Config is the embedded config of server i, as serve would build it.
func (c *Cluster) Config(i int) natsserver.EmbeddedConfig {
	s := c.Servers[i]
	return natsserver.EmbeddedConfig{
		Dir:        s.Dir,
		ServerName: s.Name,
		NoSync:     !c.opts.Sync,
		Access:     c.opts.Access,
		Listen:     c.opts.Listen,
		Host:       "127.0.0.1",
		Port:       -1,
		Cluster: natsserver.ClusterConfig{
			Listen:   s.Route,
			Routes:   c.routes,
			Password: ClusterPassword,
			Size:     len(c.Servers),
		},
	}
}

func (c *Cluster) start(i int) error {
	e, err := natsserver.StartEmbedded(c.Config(i))
	if err != nil {
		return fmt.Errorf("server %s: %w", c.Servers[i].Name, err)
	}
	c.Servers[i].Embedded = e
	return nil
}

// Stop shuts server i down, keeping its store.
func (c *Cluster) Stop(i int) {
	c.t.Helper()
	if s := c.Servers[i]; s.Embedded != nil {
		s.Shutdown()
		s.Embedded = nil
	}
}

// Start starts a stopped server i again on its store.
func (c *Cluster) Start(i int) {
	c.t.Helper()
	if c.Servers[i].Embedded != nil {
		return
	}
	if err := c.start(i); err != nil {
		c.t.Fatalf("restart: %v", err)
	}
}

// StopOthers stops every running server but server keep, keeping their
// stores, and returns the ones it stopped (for Start).
func (c *Cluster) StopOthers(keep int) []int {
	c.t.Helper()
	var stopped []int
	for i, s := range c.Servers {
		if i != keep && s.Embedded != nil {
			c.Stop(i)
			stopped = append(stopped, i)
		}
	}
	return stopped
}

// Shutdown stops every running server.
func (c *Cluster) Shutdown() {
	for i := range c.Servers {
		c.Stop(i)
	}
}

// Running are the servers that run.
func (c *Cluster) Running() []*ClusterServer {
	var out []*ClusterServer
	for _, s := range c.Servers {
		if s.Embedded != nil {
			out = append(out, s)
		}
	}
	return out
}

// WaitForMetaLeader polls (up to 30s) until every running server sees the
// same JetStream meta leader and is current, and returns that leader.
func (c *Cluster) WaitForMetaLeader() *ClusterServer {
	c.t.Helper()
	var leader *ClusterServer
	CheckFor(c.t, 30*time.Second, 25*time.Millisecond, func() error {
		name := ""
		for _, s := range c.Running() {
			st := s.ClusterStatus()
			if st.MetaLeader == "" || !st.Current {
				return fmt.Errorf("%s sees no meta leader yet (%d of %d reachable)", s.Name, st.Reachable, st.Size)
			}
			if name != "" && st.MetaLeader != name {
				return fmt.Errorf("servers disagree on the meta leader: %s and %s", name, st.MetaLeader)
			}
			name = st.MetaLeader
		}
		leader = c.server(name)
		if leader == nil {
			return fmt.Errorf("meta leader %s is not running", name)
		}
		return nil
	})
	return leader
}

func (c *Cluster) server(name string) *ClusterServer {
	for _, s := range c.Running() {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// WaitStreamStored polls (up to 30s) until every running server's copy of
// the stream holds its messages up to seq: an append is acknowledged once
// a majority holds it, and a test that stops replicas right after one
// waits for the others too.
func (c *Cluster) WaitStreamStored(stream string, seq uint64) {
	c.t.Helper()
	CheckFor(c.t, 30*time.Second, 25*time.Millisecond, func() error {
		for _, s := range c.Running() {
			last, err := streamLastSeq(s, stream)
			if err != nil {
				return err
			}
			if last < seq {
				return fmt.Errorf("%s holds stream %s up to %d, want %d", s.Name, stream, last, seq)
			}
		}
		return nil
	})
}

// StreamLastSeq is the last sequence of stream that server s stores (0:
// none, or the stream is not there).
func (c *Cluster) StreamLastSeq(s *ClusterServer, stream string) uint64 {
	c.t.Helper()
	last, err := streamLastSeq(s, stream)
	if err != nil {
		c.t.Fatal(err)
	}
	return last
}

func streamLastSeq(s *ClusterServer, stream string) (uint64, error) {
	acc, err := s.Server.JszAccount(&server.JSzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Streams: true})
	if err != nil {
		return 0, fmt.Errorf("%s: %w", s.Name, err)
	}
	for _, sd := range acc.Streams {
		if sd.Name == stream {
			return sd.State.LastSeq, nil
		}
	}
	return 0, nil
}

// JetStream is a JetStream context on server i's in-process connection.
func (c *Cluster) JetStream(i int) jetstream.JetStream {
	c.t.Helper()
	js, err := jetstream.New(c.Servers[i].Conn)
	if err != nil {
		c.t.Fatalf("jetstream: %v", err)
	}
	return js
}

// Store opens the event store, replicated on every server of the cluster,
// through server i.
func (c *Cluster) Store(i int, cfg eventlog.StoreConfig) *eventlog.Store {
	c.t.Helper()
	if cfg.Replicas == 0 {
		cfg.Replicas = len(c.Servers)
	}
	var st *eventlog.Store
	// Right after the meta leader, the peers may not all be known yet, and
	// an R3 stream cannot be placed: retry, bounded.
	CheckFor(c.t, 30*time.Second, 50*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var err error
		st, err = eventlog.OpenStore(ctx, c.JetStream(i), cfg)
		return err
	})
	return st
}

// StreamLeader polls until the stream has a leader and returns it.
func (c *Cluster) StreamLeader(stream string) *ClusterServer {
	c.t.Helper()
	var leader *ClusterServer
	CheckFor(c.t, 30*time.Second, 25*time.Millisecond, func() error {
		for _, s := range c.Running() {
			if s.Server.JetStreamIsStreamLeader("$G", stream) {
				leader = s
				return nil
			}
		}
		return fmt.Errorf("stream %s has no leader", stream)
	})
	return leader
}

// StepDownStream makes the stream's leader step down and waits until
// another server leads it; it returns the new leader.
func (c *Cluster) StepDownStream(stream string) *ClusterServer {
	c.t.Helper()
	old := c.StreamLeader(stream)
	// The JetStream API, as an operator's nats CLI would ask it.
	resp, err := old.Conn.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil, 10*time.Second)
	if err != nil {
		c.t.Fatalf("step down stream %s on %s: %v", stream, old.Name, err)
	}
	if !strings.Contains(string(resp.Data), `"success":true`) {
		c.t.Fatalf("step down stream %s: %s", stream, resp.Data)
	}
	var leader *ClusterServer
	CheckFor(c.t, 30*time.Second, 25*time.Millisecond, func() error {
		for _, s := range c.Running() {
			if s != old && s.Server.JetStreamIsStreamLeader("$G", stream) {
				leader = s
				return nil
			}
		}
		return fmt.Errorf("stream %s has no new leader after %s stepped down", stream, old.Name)
	})
	return leader
}

// StreamReport says what each running server knows of the stream: its
// own copy's last sequence, the leader it sees and its view of every
// replica. A cluster test prints it when the cluster did not do what it
// waited for, so a rare failure leaves its evidence.
func (c *Cluster) StreamReport(stream string) string {
	var b strings.Builder
	for _, s := range c.Running() {
		acc, err := s.Server.JszAccount(&server.JSzOptions{Account: server.DEFAULT_GLOBAL_ACCOUNT, Streams: true, RaftGroups: true})
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", s.Name, err)
			continue
		}
		st := s.ClusterStatus()
		fmt.Fprintf(&b, "%s (meta leader %q, %d of %d reachable):", s.Name, st.MetaLeader, st.Reachable, st.Size)
		found := false
		for _, sd := range acc.Streams {
			if sd.Name != stream {
				continue
			}
			found = true
			fmt.Fprintf(&b, " last seq %d", sd.State.LastSeq)
			if ci := sd.Cluster; ci != nil {
				fmt.Fprintf(&b, ", group %s, leader %q", ci.RaftGroup, ci.Leader)
				for _, p := range ci.Replicas {
					fmt.Fprintf(&b, "; replica %s current=%v offline=%v active=%v lag=%d", p.Name, p.Current, p.Offline, p.Active, p.Lag)
				}
			}
		}
		if !found {
			b.WriteString(" holds no copy")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Follower is a running server that does not lead the stream.
func (c *Cluster) Follower(stream string) int {
	c.t.Helper()
	leader := c.StreamLeader(stream)
	for i, s := range c.Servers {
		if s.Embedded != nil && s != leader {
			return i
		}
	}
	c.t.Fatalf("stream %s has no running follower", stream)
	return -1
}

// Index is the position of s in c.Servers.
func (c *Cluster) Index(s *ClusterServer) int {
	for i := range c.Servers {
		if c.Servers[i] == s {
			return i
		}
	}
	return -1
}

// String names the servers and their routes.
func (c *Cluster) String() string {
	out := ""
	for i, s := range c.Servers {
		out += s.Name + "@" + s.Route
		if i < len(c.Servers)-1 {
			out += " "
		}
	}
	return out + " (" + strconv.Itoa(len(c.Servers)) + " servers)"
}
