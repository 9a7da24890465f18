package natsserver

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"k8s.io/utils/clock"
)

// EmbeddedConfig configures an in-process nats-server with JetStream.
type EmbeddedConfig struct {
	// Dir holds the JetStream file store. Required: an empty store dir
	// would silently fall back to a temp dir.
	Dir string
	// ServerName must be stable across restarts of one store.
	ServerName string
	// Listen opens a client port on Host:Port (Port -1 picks one) for the
	// read-only subscribers of Access. Off by default: the process talks to
	// its server in memory. A Host other than loopback needs TLS.
	Listen bool
	Host   string
	Port   int
	// NoSync turns off the fsync of every append. By default a single
	// server fsyncs each write, because the file store's own default (every
	// 2 minutes) loses acknowledged events on power loss.
	NoSync bool
	// MaxMemory and MaxStore bound JetStream; MaxMemory defaults to 256 MiB
	// (the server would otherwise take 75% of the host's memory).
	MaxMemory int64
	MaxStore  int64
	// Logs turns the server's own log on.
	Logs bool
	// Access is who may connect and what they may do (see Access). The
	// process's own connection is always the only writer.
	Access Access
	// TLS of the client port; required when Host is not loopback.
	TLS ListenTLS
	// Cluster joins other replicas (see ClusterConfig); off by default.
	// ServerName must then be the replica's stable name.
	Cluster ClusterConfig
	// Logger receives the client port's refused logins (default
	// slog.Default()).
	Logger *slog.Logger
}

// ListenTLS names the PEM files of the client port's TLS. With
// ClientCAFile, clients must also present a certificate of that CA.
type ListenTLS struct {
	CertFile, KeyFile, ClientCAFile string
}

func (t ListenTLS) enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Embedded is a running in-process server and a client connection to it.
type Embedded struct {
	Server *server.Server
	Conn   *nats.Conn
	// SubscribersConn is the process's connection in SubscribersAccount,
	// which keeps the subscribers' copies of the streams (nil when the
	// account is not defined).
	SubscribersConn *nats.Conn
	// AuthFailures counts the client port's refused logins (nil without a
	// client port).
	AuthFailures *AuthFailures
	watchConn    *nats.Conn
	lock         *DataDirLock
	cfg          EmbeddedConfig
}

// StartEmbedded starts the server and connects to it in process.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Dir == "" {
		return nil, errors.New("embedded nats: no data dir")
	}
	lock, err := openDataDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	started := false
	defer func() {
		if !started {
			_ = lock.Release()
		}
	}()
	if cfg.ServerName == "" {
		cfg.ServerName = "claimstream-0"
	}
	if cfg.MaxMemory == 0 {
		cfg.MaxMemory = 256 << 20
	}
	host, port := cfg.Host, cfg.Port
	if host == "" {
		host = "127.0.0.1"
	}
	if !cfg.Listen {
		port = -1
	}
	// A server without a client listener never starts its routes: a
	// clustered one keeps a loopback port nobody can log in to (the
	// process's own key works in process only).
	dontListen := !cfg.Listen && !cfg.Cluster.Enabled()
	if !cfg.Listen {
		host = "127.0.0.1"
	}
	if err := cfg.Access.Validate(); err != nil {
		return nil, fmt.Errorf("embedded nats: access: %w", err)
	}
	if err := cfg.Cluster.validate(); err != nil {
		return nil, fmt.Errorf("embedded nats: cluster: %w", err)
	}
	if cfg.Listen && !IsLoopback(host) && !cfg.TLS.enabled() {
		return nil, fmt.Errorf("embedded nats: the client port on %s is not on loopback and has no TLS: passwords and events would cross the network in clear", host)
	}
	proc, err := newProcessIdentity()
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	copier, err := newProcessIdentity()
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	watcher, err := newProcessIdentity()
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	opts := &server.Options{
		ServerName:         cfg.ServerName,
		Host:               host,
		Port:               port,
		DontListen:         dontListen,
		NoSigs:             true,
		NoLog:              !cfg.Logs,
		JetStream:          true,
		StoreDir:           filepath.Clean(cfg.Dir),
		JetStreamMaxMemory: cfg.MaxMemory,
		JetStreamMaxStore:  cfg.MaxStore,
		SyncAlways:         !cfg.NoSync,
	}
	// Accounts are cluster-wide: every replica defines the same ones.
	cfg.Access.clustered = cfg.Cluster.Enabled()
	cfg.Access.listening = cfg.Listen
	if err := cfg.Access.configure(opts, proc, copier); err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if cfg.Listen {
		configureAuthWatch(opts, watcher)
	}
	if cfg.Cluster.Enabled() {
		if err := cfg.Cluster.configure(opts, cfg.ServerName); err != nil {
			return nil, fmt.Errorf("embedded nats: cluster: %w", err)
		}
	}
	if cfg.TLS.enabled() {
		if cfg.TLS.CertFile == "" || cfg.TLS.KeyFile == "" {
			return nil, errors.New("embedded nats: TLS needs both a certificate and a key")
		}
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: cfg.TLS.CertFile,
			KeyFile:  cfg.TLS.KeyFile,
			CaFile:   cfg.TLS.ClientCAFile,
			Verify:   cfg.TLS.ClientCAFile != "",
		})
		if err != nil {
			return nil, fmt.Errorf("embedded nats: TLS: %w", err)
		}
		opts.TLSConfig, opts.TLSVerify = tc, cfg.TLS.ClientCAFile != ""
		opts.TLSTimeout = 2
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	if err := cfg.Access.wire(ns); err != nil {
		return nil, fmt.Errorf("embedded nats: access: %w", err)
	}
	if cfg.Logs {
		ns.ConfigureLogger()
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("embedded nats: not ready after 30s")
	}
	if err := cfg.Access.checkJetStream(ns); err != nil {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	nc, err := nats.Connect("", nats.InProcessServer(ns), nats.Name("claimstream"),
		nats.Nkey(proc.pub, proc.kp.Sign), nats.CustomInboxPrefix(ProcessInboxPrefix))
	if err != nil {
		ns.Shutdown()
		return nil, fmt.Errorf("embedded nats: connect: %w", err)
	}
	e := &Embedded{Server: ns, Conn: nc, lock: lock, cfg: cfg}
	if cfg.Access.needsAccount() {
		e.SubscribersConn, err = nats.Connect("", nats.InProcessServer(ns), nats.Name("claimstream subscribers' copies"),
			nats.Nkey(copier.pub, copier.kp.Sign), nats.CustomInboxPrefix(ProcessInboxPrefix))
		if err != nil {
			e.closeConns()
			ns.Shutdown()
			return nil, fmt.Errorf("embedded nats: connect to the subscribers' account: %w", err)
		}
	}
	if cfg.Listen {
		e.watchConn, err = nats.Connect("", nats.InProcessServer(ns), nats.Name("claimstream refused logins"),
			nats.Nkey(watcher.pub, watcher.kp.Sign), nats.CustomInboxPrefix(ProcessInboxPrefix))
		if err == nil {
			log := cfg.Logger
			if log == nil {
				log = slog.Default()
			}
			e.AuthFailures, err = watchAuthFailures(ns, e.watchConn, log, clock.RealClock{})
		}
		if err != nil {
			e.closeConns()
			ns.Shutdown()
			return nil, fmt.Errorf("embedded nats: %w", err)
		}
	}
	started = true
	return e, nil
}

// closeConns closes the process's connections to its server.
func (e *Embedded) closeConns() {
	for _, c := range []*nats.Conn{e.watchConn, e.SubscribersConn, e.Conn} {
		if c != nil {
			c.Close()
		}
	}
}

// ClientURL is the address of the client listener ("" when not listening).
func (e *Embedded) ClientURL() string {
	if !e.cfg.Listen || e.Server.Addr() == nil {
		return ""
	}
	return e.Server.ClientURL()
}

// Shutdown closes the connection and stops the server, waiting for it.
func (e *Embedded) Shutdown() {
	e.closeConns()
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
	_ = e.lock.Release()
}
