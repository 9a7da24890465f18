package natsserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/claimstream/claimstream/events/eventlog"
)

// ClusterConfig joins the embedded server to other claimstream replicas
// through nats-server's own routes and JetStream clustering: the replicas
// share one log, replicated by JetStream's Raft groups.
type ClusterConfig struct {
	// Name is the NATS cluster name, the same on every replica (default
	// "claimstream").
	Name string
	// Listen is the host:port the routes of the other replicas connect to.
	// Empty: no cluster, a single server. A host other than loopback needs
	// TLS.
	Listen string
	// Routes are the peers' route URLs (nats-route://host:port or
	// host:port). The list may name this server too: nats-server ignores a
	// route to itself, so every replica can be given the same list.
	Routes []string
	// Password is the shared route secret: every replica authenticates
	// the routes of the others with it, and presents it on its own.
	Password string
	// TLS of the routes: each side presents CertFile and verifies the
	// other's certificate against CAFile.
	TLS ClusterTLS
	// Size is the number of replicas the cluster is meant to have (the
	// quorum is Size/2+1). Default: 1 + the routes other than this one.
	Size int
}

// ClusterTLS names the PEM files of the route TLS.
type ClusterTLS struct {
	CertFile, KeyFile, CAFile string
}

func (t ClusterTLS) enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" }

// RouteUser is the user name of the routes; the secret is the password.
const RouteUser = "claimstream-route"

// DefaultClusterName is the NATS cluster name when none is given.
const DefaultClusterName = "claimstream"

// Enabled reports whether the server joins a cluster.
func (c ClusterConfig) Enabled() bool { return c.Listen != "" }

// routeListen splits Listen into host and port.
func (c ClusterConfig) routeListen() (string, int, error) {
	host, portStr, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return "", 0, fmt.Errorf("route listen address %q: %w", c.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("route listen address %q: bad port %q", c.Listen, portStr)
	}
	if host == "" {
		host = "0.0.0.0" // an empty host listens on every interface
	}
	return host, port, nil
}

// ParseRoute reads one peer route: nats-route://host:port or host:port. A
// URL that carries a user or password is refused: the secret comes from
// its file, never from a command line.
func ParseRoute(s string) (*url.URL, error) {
	raw := strings.TrimSpace(s)
	if raw == "" {
		return nil, errors.New("empty route")
	}
	if !strings.Contains(raw, "://") {
		raw = "nats-route://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("route %q: %w", s, err)
	}
	if u.Scheme != "nats-route" && u.Scheme != "nats" && u.Scheme != "tls" {
		return nil, fmt.Errorf("route %q: scheme %q is not nats-route", s, u.Scheme)
	}
	if u.User != nil {
		return nil, fmt.Errorf("route %q carries credentials: give the route secret as a password file instead", s)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("route %q: only host:port is allowed", s)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("route %q: needs host:port", s)
	}
	if strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return nil, fmt.Errorf("route %q: bad IPv6 address %q", s, host)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return nil, fmt.Errorf("route %q: bad port %q", s, port)
	}
	return &url.URL{Scheme: "nats-route", Host: net.JoinHostPort(host, port)}, nil
}

// validate reports the first unusable part of c.
func (c ClusterConfig) validate() error {
	if !c.Enabled() {
		if len(c.Routes) > 0 || c.Password != "" || c.TLS.enabled() {
			return errors.New("routes, a route secret or route TLS need a route listen address")
		}
		return nil
	}
	host, _, err := c.routeListen()
	if err != nil {
		return err
	}
	if c.Password == "" {
		return errors.New("routes need the shared route secret: without it anyone who reaches the route port joins the cluster and reads and writes the log")
	}
	if strings.ContainsAny(c.Password, "\r\n") {
		return errors.New("the route secret contains a line break")
	}
	if c.Name != "" && !eventlog.ValidToken(c.Name) {
		return fmt.Errorf("cluster name %q is not one subject token", c.Name)
	}
	for _, r := range c.Routes {
		if _, err := ParseRoute(r); err != nil {
			return err
		}
	}
	switch {
	case c.TLS.enabled() && (c.TLS.CertFile == "" || c.TLS.KeyFile == "" || c.TLS.CAFile == ""):
		return errors.New("route TLS needs a certificate, a key and the CA the peers' certificates chain to")
	case !c.TLS.enabled() && !IsLoopback(host):
		return fmt.Errorf("the route port on %s is not on loopback and has no TLS: the route secret and every event would cross the network in clear", host)
	}
	if c.Size < 0 {
		return fmt.Errorf("cluster size %d is negative", c.Size)
	}
	return nil
}

// configure puts the routes, their secret and TLS into the server's
// options. validate has passed.
func (c ClusterConfig) configure(opts *server.Options, serverName string) error {
	host, port, _ := c.routeListen()
	name := c.Name
	if name == "" {
		name = DefaultClusterName
	}
	opts.Cluster = server.ClusterOpts{
		Name:        name,
		Host:        host,
		Port:        port,
		Username:    RouteUser,
		Password:    c.Password,
		AuthTimeout: 2,
	}
	opts.Routes = nil
	for _, r := range c.Routes {
		u, _ := ParseRoute(r)
		if c.isSelf(u, serverName) {
			// nats-server would drop the route to itself once connected,
			// but counts it first: a fresh cluster of three whose lists
			// name themselves then needs all three for its first meta
			// leader, where two must do.
			continue
		}
		// nats-server presents the credentials of the route URL.
		u.User = url.UserPassword(RouteUser, c.Password)
		opts.Routes = append(opts.Routes, u)
	}
	if c.TLS.enabled() {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: c.TLS.CertFile,
			KeyFile:  c.TLS.KeyFile,
			CaFile:   c.TLS.CAFile,
			Verify:   true,
		})
		if err != nil {
			return fmt.Errorf("route TLS: %w", err)
		}
		// A route is both server and client: strict verification both
		// ways, as nats-server's own config parser sets it.
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		tc.RootCAs = tc.ClientCAs
		opts.Cluster.TLSConfig = tc
		opts.Cluster.TLSTimeout = 2
	}
	return nil
}

// isSelf reports whether route u leads back to this server: the route
// listen address itself, a name whose first label is this server's name
// on the route port (a StatefulSet's pod-0.service:6222), or an address
// of this host on the route port.
func (c ClusterConfig) isSelf(u *url.URL, serverName string) bool {
	lhost, lport, err := c.routeListen()
	if err != nil {
		return false
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || port != strconv.Itoa(lport) {
		return false
	}
	if host == lhost || strings.EqualFold(strings.SplitN(host, ".", 2)[0], serverName) {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil || lhost != "0.0.0.0" && lhost != "::" {
		return false
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// size is the number of replicas the cluster is meant to have.
func (c ClusterConfig) size(serverName string) int {
	if c.Size > 0 {
		return c.Size
	}
	n := 1
	for _, r := range c.Routes {
		if u, err := ParseRoute(r); err == nil && !c.isSelf(u, serverName) {
			n++
		}
	}
	return n
}

// ClusterStatus is what this replica sees of the cluster.
type ClusterStatus struct {
	// Clustered: the server runs clustered JetStream.
	Clustered bool
	// Size is the number of replicas the cluster is meant to have.
	Size int
	// Reachable counts the replicas this one is connected to, itself
	// included.
	Reachable int
	// MetaLeader is the server name of the JetStream meta leader ("" while
	// there is none).
	MetaLeader string
	// Current: this server's copy of the JetStream meta state is current.
	Current bool
}

// Quorum reports whether JetStream can take writes: a meta leader exists,
// and a majority of the replicas is reachable.
func (s ClusterStatus) Quorum() bool {
	if !s.Clustered {
		return true
	}
	return s.MetaLeader != "" && s.Reachable >= s.Size/2+1
}

// Needed is the number of replicas a quorum needs.
func (s ClusterStatus) Needed() int { return s.Size/2 + 1 }

// ClusterStatus looks at the cluster from this replica.
func (e *Embedded) ClusterStatus() ClusterStatus {
	ns := e.Server
	if !e.cfg.Cluster.Enabled() {
		return ClusterStatus{Size: 1, Reachable: 1}
	}
	st := ClusterStatus{Clustered: true, Size: e.cfg.Cluster.size(e.cfg.ServerName), Reachable: 1}
	if rz, err := ns.Routez(nil); err == nil {
		peers := map[string]bool{}
		for _, r := range rz.Routes {
			if r.RemoteName != "" {
				peers[r.RemoteName] = true
			} else {
				peers[r.RemoteID] = true
			}
		}
		st.Reachable += len(peers)
	}
	if st.Reachable > st.Size {
		st.Size = st.Reachable
	}
	if js, err := ns.Jsz(&server.JSzOptions{}); err == nil && js.Meta != nil {
		st.MetaLeader = js.Meta.Leader
	}
	st.Current = ns.JetStreamIsCurrent()
	return st
}

// ClusterURL is the route URL other replicas reach this server on (""
// without a cluster).
func (e *Embedded) ClusterURL() string {
	if !e.cfg.Cluster.Enabled() {
		return ""
	}
	if a := e.Server.ClusterAddr(); a != nil {
		return "nats-route://" + a.String()
	}
	return ""
}

// Clustered reports whether the server was started to join a cluster.
func (e *Embedded) Clustered() bool { return e.cfg.Cluster.Enabled() }

// WaitForMetaLeader polls until the JetStream meta leader is known and
// this server's meta state is current, or ctx ends. A single server has
// nothing to wait for. progress, when set, is called every 10s of waiting
// with what is seen, so a replica waiting for its peers says so.
func (e *Embedded) WaitForMetaLeader(ctx context.Context, progress func(ClusterStatus, time.Duration)) error {
	if !e.cfg.Cluster.Enabled() {
		return nil
	}
	start := time.Now()
	lastReport := start
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		st := e.ClusterStatus()
		if st.MetaLeader != "" && st.Current {
			return nil
		}
		if progress != nil && time.Since(lastReport) >= 10*time.Second {
			lastReport = time.Now()
			progress(st, time.Since(start))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no JetStream meta leader (%d of %d replicas reachable): %w", st.Reachable, st.Size, ctx.Err())
		case <-t.C:
		}
	}
}
