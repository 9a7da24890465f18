package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/projections"
)

// natsClusterOptions are the flags that join this replica's embedded NATS
// server to the other replicas (docs/operations/replicas.md).
type natsClusterOptions struct {
	// replicaName is the stable name of this replica: the NATS server name
	// (a JetStream peer is known by it) and the leader lease identity.
	replicaName string
	// replicas is the cluster size and the replica count of every stream
	// and bucket: 1 or 3.
	replicas int

	clusterListen  string
	routes         []string
	passwordFile   string
	clusterTLSCert string
	clusterTLSKey  string
	clusterTLSCA   string

	// restoreBackup is a backup file restored into the log when the log
	// does not exist yet (moving a single replica's log to three).
	restoreBackup string
}

// defaultReplicaName is $POD_NAME (a StatefulSet pod's stable name), else
// the host name.
func defaultReplicaName() string {
	if n := os.Getenv("POD_NAME"); n != "" {
		return n
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "claimstream-0"
}

func (n *natsClusterOptions) addClusterFlags(f *pflag.FlagSet) {
	f.StringVar(&n.replicaName, "replica-name", "", "stable name of this replica: its NATS server name and leader identity (default $POD_NAME, else the host name)")
	f.IntVar(&n.replicas, "replicas", 1, "number of replicas sharing the log: 1, or 3 with --nats-cluster-listen and --nats-routes (every stream and bucket is kept on that many)")
	f.StringVar(&n.clusterListen, "nats-cluster-listen", "", "host:port where the other replicas' NATS routes connect (empty: a single server)")
	f.StringSliceVar(&n.routes, "nats-routes", nil, "comma-separated route URLs of the replicas (nats-route://host:port or host:port; may include this one)")
	f.StringVar(&n.passwordFile, "nats-cluster-password-file", "", "file holding the routes' shared secret, the same on every replica (required with --nats-cluster-listen)")
	f.StringVar(&n.clusterTLSCert, "nats-cluster-tls-cert", "", "route TLS certificate (PEM file; required off loopback)")
	f.StringVar(&n.clusterTLSKey, "nats-cluster-tls-key", "", "route TLS key (PEM file)")
	f.StringVar(&n.clusterTLSCA, "nats-cluster-tls-ca", "", "CA the other replicas' route certificates must chain to (PEM file)")
	f.StringVar(&n.restoreBackup, "restore-backup", "", "on the first start of an empty log, restore this backup file into it (give it to every replica); a log that holds the backup already is left alone")
}

// ReplicaName is this replica's stable name: --replica-name, else
// $POD_NAME, else the host name.
func (n *natsClusterOptions) ReplicaName() string {
	if n.replicaName == "" {
		return defaultReplicaName()
	}
	return n.replicaName
}

// Replicas is the replica count of the log (--replicas): the one place
// that says it; streams and buckets follow it.
func (n *natsClusterOptions) Replicas() int {
	if n.replicas == 0 {
		return 1
	}
	return n.replicas
}

// clusterConfig checks the cluster flags and turns them into the embedded
// server's cluster config. Bad input is refused before anything starts.
func (n *natsClusterOptions) clusterConfig() (natsserver.ClusterConfig, error) {
	var cc natsserver.ClusterConfig
	n.replicaName = n.ReplicaName()
	if strings.ContainsAny(n.replicaName, " \t\r\n.*>") {
		return cc, fmt.Errorf("--replica-name %q: a replica name is one word without dots or spaces (a StatefulSet pod name)", n.replicaName)
	}
	switch n.Replicas() {
	case 1:
		for flag, v := range map[string]string{"--nats-cluster-listen": n.clusterListen, "--nats-routes": strings.Join(n.routes, ","), "--nats-cluster-password-file": n.passwordFile, "--nats-cluster-tls-cert": n.clusterTLSCert, "--nats-cluster-tls-key": n.clusterTLSKey, "--nats-cluster-tls-ca": n.clusterTLSCA} {
			if v != "" {
				return cc, fmt.Errorf("%s needs --replicas 3: one replica has no cluster", flag)
			}
		}
		return cc, nil
	case 3:
	default:
		return cc, fmt.Errorf("--replicas %d: claimstream runs 1 replica or 3 (a JetStream quorum of 2 out of 3); other counts are not supported", n.replicas)
	}
	if n.clusterListen == "" || len(n.routes) == 0 {
		return cc, errors.New("--replicas 3 needs --nats-cluster-listen (this replica's route port) and --nats-routes (the replicas' route URLs)")
	}
	host, _, err := net.SplitHostPort(n.clusterListen)
	if err != nil {
		return cc, fmt.Errorf("--nats-cluster-listen %q: %w", n.clusterListen, err)
	}
	for _, r := range n.routes {
		if _, err := natsserver.ParseRoute(r); err != nil {
			return cc, fmt.Errorf("--nats-routes: %w", err)
		}
	}
	if n.passwordFile == "" {
		return cc, errors.New("--nats-cluster-listen needs --nats-cluster-password-file: without the shared secret anyone who reaches the route port joins the cluster")
	}
	b, err := os.ReadFile(n.passwordFile)
	if err != nil {
		return cc, fmt.Errorf("--nats-cluster-password-file: %w", err)
	}
	// A Secret's file often ends with a newline; the secret does not.
	pw := strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(pw) == "" {
		return cc, fmt.Errorf("--nats-cluster-password-file %s is empty", n.passwordFile)
	}
	tlsAny := n.clusterTLSCert != "" || n.clusterTLSKey != "" || n.clusterTLSCA != ""
	switch {
	case tlsAny && (n.clusterTLSCert == "" || n.clusterTLSKey == "" || n.clusterTLSCA == ""):
		return cc, errors.New("--nats-cluster-tls-cert, --nats-cluster-tls-key and --nats-cluster-tls-ca go together: each replica shows its certificate and checks the others'")
	case !tlsAny && !natsserver.IsLoopback(host):
		return cc, fmt.Errorf("--nats-cluster-listen %s is not a loopback address: routes need TLS there (--nats-cluster-tls-cert, --nats-cluster-tls-key, --nats-cluster-tls-ca)", n.clusterListen)
	}
	for flag, path := range map[string]string{"--nats-cluster-tls-cert": n.clusterTLSCert, "--nats-cluster-tls-key": n.clusterTLSKey, "--nats-cluster-tls-ca": n.clusterTLSCA} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return cc, fmt.Errorf("%s: %w", flag, err)
		}
	}
	return natsserver.ClusterConfig{
		Listen:   n.clusterListen,
		Routes:   n.routes,
		Password: pw,
		TLS:      natsserver.ClusterTLS{CertFile: n.clusterTLSCert, KeyFile: n.clusterTLSKey, CAFile: n.clusterTLSCA},
		Size:     n.Replicas(),
	}, nil
}

// joinCluster waits, with no bound but ctx, until this replica sees a
// JetStream meta leader: a replica that starts first waits for a quorum of
// its peers, and says so every 10s.
func joinCluster(ctx context.Context, emb *natsserver.Embedded, log *slog.Logger) error {
	if !emb.Clustered() {
		return nil
	}
	log.Info("waiting for a JetStream quorum of the replicas", "route", emb.ClusterURL())
	err := emb.WaitForMetaLeader(ctx, func(st natsserver.ClusterStatus, waited time.Duration) {
		log.Warn("still waiting for a JetStream quorum: start the other replicas or check their routes", "reachable", st.Reachable, "replicas", st.Size, "needed", st.Needed(), "waited", waited.Round(time.Second))
	})
	if err != nil {
		return fmt.Errorf("join the NATS cluster: %w", err)
	}
	st := emb.ClusterStatus()
	log.Info("joined the NATS cluster", "meta_leader", st.MetaLeader, "reachable", st.Reachable, "replicas", st.Size)
	return nil
}

// openStoreRetrying opens the store; on a cluster, placing a replicated
// stream fails until enough peers are known to the meta leader, so it
// retries (with backoff, bounded by ctx) while the cluster forms.
func openStoreRetrying(ctx context.Context, js jetstream.JetStream, emb *natsserver.Embedded, cfg eventlog.StoreConfig, restoreFile string, log *slog.Logger) (*eventlog.Store, error) {
	if err := restoreBackupOnce(ctx, js, emb, restoreFile, first(cfg.Stream, "CLAIMSTREAM"), cfg.Replicas, log); err != nil {
		return nil, err
	}
	if !emb.Clustered() {
		return eventlog.OpenStore(ctx, js, cfg)
	}
	wait := 100 * time.Millisecond
	logged := false
	for {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		st, err := eventlog.OpenStore(octx, js, cfg)
		cancel()
		if err == nil {
			// The views read the whole log next: from current copies only.
			err = st.WaitReplicasCurrent(ctx, func(lagging []string, why error, waited time.Duration) {
				if why != nil {
					log.Warn("waiting for the event log's stream to answer with its replicas before building the views", "err", why, "waited", waited.Round(time.Second))
					return
				}
				log.Warn("waiting for the event log's replicas to catch up before building the views", "lagging", lagging, "waited", waited.Round(time.Second))
			})
			if err != nil {
				return nil, err
			}
			return st, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		if !logged {
			log.Warn("event log stream not ready on the cluster yet; retrying", "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// logViewsAtStop says where the views stopped and their digest
// (projections.ViewsDigest): replicas stopped at the same sequence must show
// the same digest, as a restored log must match its backup's.
func (p *plane) logViewsAtStop() {
	var seq uint64
	var digest string
	var err error
	p.views.Read(func(st *projections.State) {
		seq = st.Seq
		digest, err = projections.ViewsDigest(st)
	})
	if err != nil {
		p.log.Warn("views at stop: no digest", "seq", seq, "err", err)
		return
	}
	p.log.Info("views at stop", "seq", seq, "digest", digest)
}

// clusterJetStream: on a cluster, the replicas' simultaneous creates of the
// same streams and buckets are retried until answered (natsserver.ClusterAdmin).
func clusterJetStream(js jetstream.JetStream, emb *natsserver.Embedded, log *slog.Logger) jetstream.JetStream {
	if !emb.Clustered() {
		return js
	}
	return natsserver.ClusterAdmin(js, log)
}

// restoreBackupOnce restores a backup into the log if the log does not
// exist yet, through JetStream's restore API (with the log's replica
// count: on a cluster the restore places the stream on its replicas).
// Every replica may be given the file: the first restore wins, the others
// find the log holding the backup. A log that exists with other events is
// refused, and nothing is changed.
func restoreBackupOnce(ctx context.Context, js jetstream.JetStream, emb *natsserver.Embedded, file, stream string, replicas int, log *slog.Logger) error {
	if file == "" {
		return nil
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("--restore-backup: %w", err)
	}
	defer f.Close()
	m, err := eventlog.VerifyBackup(f)
	if err != nil {
		return fmt.Errorf("--restore-backup refused, nothing written: %w", err)
	}
	if m.Stream != stream {
		return fmt.Errorf("--restore-backup: the backup holds stream %s, this log is stream %s (--stream)", m.Stream, stream)
	}
	if replicas > 1 {
		if m, err = m.WithReplicas(replicas); err != nil {
			return fmt.Errorf("--restore-backup refused, nothing written: %w", err)
		}
	}
	// Racing replicas: one restores, the others see the stream in use
	// (and, until the restore ends, empty). Bounded: a big log takes a
	// while to upload, not forever.
	busySince := time.Time{}
	var partialLast uint64
	var partialSince time.Time
	busy := func() error {
		if busySince.IsZero() {
			busySince = time.Now()
		} else if time.Since(busySince) > 10*time.Minute {
			return errors.New("--restore-backup: the log exists and stays empty: was a replica started without --restore-backup? Stop all, empty their data dirs and start them again, each with the flag")
		}
		return nil
	}
	for {
		// Bounded: right after a cluster starts a request may go unanswered.
		sctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		st, err := js.Stream(sctx, stream)
		cancel()
		switch {
		case err == nil:
			last := st.CachedInfo().State.LastSeq
			if last >= m.LastSeq && (last > 0 || m.LastSeq == 0) {
				log.Info("--restore-backup: the log exists; not restored (again)", "file", file, "seq", last, "backup_last_seq", m.LastSeq)
				return nil
			}
			if last > 0 && last < m.LastSeq {
				// On a cluster another replica's restore may be landing:
				// wait while the log grows; a log that stays short is
				// another log.
				if emb.Clustered() && last != partialLast {
					partialLast, partialSince = last, time.Now()
				} else if !emb.Clustered() || time.Since(partialSince) > 15*time.Second {
					return fmt.Errorf("--restore-backup: the log exists with events up to seq %d and the backup ends at seq %d: a backup is restored only into an empty log", last, m.LastSeq)
				}
			}
			if err := busy(); err != nil {
				return err
			}
		case errors.Is(err, jetstream.ErrStreamNotFound):
			log.Info("restoring the backup into the log", "file", file, "stream", m.Stream, "events", m.Msgs, "last_seq", m.LastSeq)
			begin := time.Now()
			err := eventlog.RestoreBackup(ctx, emb.Conn, f, m)
			if err == nil {
				log.Info("restored the backup into the log", "file", file, "events", m.Msgs, "last_seq", m.LastSeq, "took", time.Since(begin).Round(time.Millisecond))
				return nil
			}
			retry := errors.Is(err, eventlog.ErrRestoreRaced) ||
				// Right after the cluster forms, JetStream's API may
				// have nobody to answer yet: nothing was restored.
				errors.Is(err, nats.ErrNoResponders) ||
				// or no peer to place the stream on.
				errors.Is(err, eventlog.ErrRestoreNoPeers) ||
				// or the server gave up on chunks that came too slowly
				// (a cluster still forming): it drops a stalled restore
				// before creating anything.
				errors.Is(err, eventlog.ErrRestoreStalled) ||
				errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
			if !retry {
				return fmt.Errorf("--restore-backup: %w", err)
			}
			// Another replica won the race (or the racing request went
			// unanswered): look again.
			log.Debug("--restore-backup: not restored this time; looking again", "err", err)
			if err := busy(); err != nil {
				return err
			}
		default:
			// The cluster is still forming.
			log.Debug("--restore-backup: the log cannot be looked at yet", "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("--restore-backup: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
