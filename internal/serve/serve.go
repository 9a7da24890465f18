package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
	"github.com/claimstream/claimstream/projections/timeline"
	"github.com/claimstream/claimstream/provider"
	"github.com/claimstream/claimstream/provider/rest"
)

type serveOptions struct {
	config     string
	configPoll time.Duration
	dataDir    string
	stream     string
	nats       natsOptions
	noFsync    bool
	acceptGaps bool
	retention  retentionOptions
	logLevel   string
	logFormat  string
	// logOut receives the log (nil: standard error); tests read it.
	logOut io.Writer

	grpcAddress string
	tlsCert     string
	tlsKey      string
	tlsClientCA string
	plaintext   bool

	apiAddress   string
	apiToken     string
	apiTokenFile string
	apiReadToken readTokenFlags
	apiTLSCert   string
	apiTLSKey    string
	authLimit    authLimitFlags
	maxWhatIfs   int

	sinks          string
	metricsAddress string
	httpLimits     httpLimitFlags // serve_httplimits.go
	pprof          bool           // serve_pprof.go
	otlpEndpoint   string

	cluster clusterOptions

	eventSource string // event_source.go

	// shutdownTimeout bounds the whole stop (shutdown.go).
	shutdownTimeout time.Duration

	timing *startupTimer // set by runServe: one log line per start-up phase
	// starting answers /readyz on the API's address while the plane is
	// built (set by runServe; nil without an API).
	starting *startupHealth
	// poolFile is the pool file being parsed (set by runServe; nil
	// without one): startPlane builds the views once it is parsed.
	poolFile *poolLoad
	// storeOpened, when set (tests), is called once the log's store is
	// open, before the views read it.
	storeOpened func(*eventlog.Store)
}

func newServe() *cobra.Command {
	o := serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the control plane: embedded NATS, the event log, the views, the reactors and the provider",
		Long: `serve runs claimstream in one process: an embedded NATS server with the
JetStream event log, the projected views, the pool config reconciler, the
reactors and the cluster-autoscaler provider.

The pool file (--config) is applied at start and again whenever it changes
or the process gets SIGHUP; an invalid file is reported (file, line, field)
and changes nothing. Ctrl-C stops cleanly; a restart resumes from the log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runServe(ctx, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "pool file of groups and slots (required)")
	f.DurationVar(&o.configPoll, "config-poll", 10*time.Second, "how often to look for a changed pool file")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "where the embedded NATS server keeps the event log")
	f.StringVar(&o.stream, "stream", "CLAIMSTREAM", "JetStream stream name of the event log")
	o.nats.addFlags(f)
	o.retention.addFlags(f)
	f.BoolVar(&o.noFsync, "no-fsync", false, "do not fsync every append (loses acknowledged events on power loss)")
	f.BoolVar(&o.acceptGaps, "accept-log-gaps", false, "serve writes even when sequences are missing from a damaged log (see docs/operations/faults.md)")
	f.StringVar(&o.grpcAddress, "grpc-address", "127.0.0.1:8086", "cluster-autoscaler externalgrpc provider address (empty: no provider)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "provider server certificate (PEM file)")
	f.StringVar(&o.tlsKey, "tls-key", "", "provider server key (PEM file)")
	f.StringVar(&o.tlsClientCA, "tls-client-ca", "", "CA that client certificates must chain to (mTLS, as cluster-autoscaler's cloud-config cacert)")
	f.BoolVar(&o.plaintext, "plaintext", false, "serve the provider without TLS (explicit opt-in; loopback testing only)")
	f.StringVar(&o.apiAddress, "api-address", "127.0.0.1:8087", "REST API address (empty: no API)")
	f.StringVar(&o.apiToken, "api-token", "", "bearer token of the REST API (env CLAIMSTREAM_API_TOKEN); default: read --api-token-file")
	f.StringVar(&o.apiTokenFile, "api-token-file", "", "file holding the API token (default <data-dir>/api-token, generated on first start)")
	o.apiReadToken.register(f)
	f.StringVar(&o.apiTLSCert, "api-tls-cert", "", "REST API server certificate (PEM file, re-read when it changes); without it the API is plain HTTP")
	f.StringVar(&o.apiTLSKey, "api-tls-key", "", "REST API server key (PEM file)")
	o.authLimit.addFlags(f)
	f.IntVar(&o.maxWhatIfs, "api-max-whatifs", rest.DefaultMaxWhatIfs, "REST API: the most what-ifs (POST /api/v1/whatif) running at once, whoever asks; one more is answered 429 (0 or less: the default)")
	f.StringVar(&o.eventSource, "event-source", "", eventSourceHelp)
	f.StringVar(&o.sinks, "sinks", "", "CloudEvents sinks file (webhooks with filters, retries and dead letters); see deploy/examples/sinks.yaml")
	f.StringVar(&o.metricsAddress, "metrics-address", "127.0.0.1:9464", "Prometheus /metrics address (empty: none)")
	o.httpLimits.addFlags(f)
	f.BoolVar(&o.pprof, "pprof", false, pprofHelp)
	addRetiredMemoryFlags(f)
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "OTLP/gRPC collector for traces and metrics (host:4317, http://host:4317 for plaintext)")
	f.StringVar(&o.cluster.kubeconfig, "kubeconfig", "", "drive the cluster of this kubeconfig (default: in-cluster config in a pod, else the simulator)")
	f.StringVar(&o.cluster.namespace, "namespace", "claimstream", "namespace of the lifecycle Jobs")
	f.DurationVar(&o.cluster.powerEvery, "power-status-interval", handlers.DefaultPowerWatchInterval, "how often serve reads the power driver of a slot with no Node and no live claim, so a machine switched on by hand is seen before it joins (0: never)")
	f.StringVar(&o.cluster.powerImage, "power-image", "", "the claimstream image a power driver's lifecycle Job runs from (the chart sets its own)")
	f.StringVar(&o.cluster.releaseNamespace, "release-namespace", "", "namespace of the leader Lease, the status ConfigMap and serve's own Pod (default: $POD_NAMESPACE, else --namespace)")
	f.Float32Var(&o.cluster.kubeQPS, "kube-api-qps", kube.DefaultQPS, "Kubernetes API requests a second, all API groups together (one token bucket; 0: the default)")
	f.IntVar(&o.cluster.kubeBurst, "kube-api-burst", kube.DefaultBurst, "Kubernetes API requests sent at once above --kube-api-qps (0: the default)")
	f.StringVar(&o.cluster.scenario, "scenario", "", "simulator only: a scenario file that drives demand over time")
	f.Float64Var(&o.cluster.speed, "speed", 0, "simulator only: simulated seconds per real second (default: the scenario's)")
	f.Int64Var(&o.cluster.seed, "seed", 1, "simulator only: seed of the machines' failures")
	f.BoolVar(&o.cluster.leaderElect, "leader-elect", true, "run the leader-only work only while holding the leader lease (a Lease in a cluster, a JetStream key-value lease otherwise); false: one replica that always leads")
	f.StringVar(&o.cluster.leaseName, "lease-name", "claimstream", "name of the leader Lease")
	f.DurationVar(&o.cluster.statusInterval, "status-interval", kube.DefaultStatusInterval, "least time between two writes of the claimstream-status ConfigMap")
	f.DurationVar(&o.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout, "the longest a stop (SIGTERM) takes, every step together: keep it under the pod's terminationGracePeriodSeconds")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "text", "text or json")
	_ = cmd.MarkFlagRequired("config")
	return cmd
}

// defaultDataDir is $XDG_STATE_HOME/claimstream, or ~/.local/state/claimstream.
func defaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "claimstream")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "claimstream")
	}
	return "claimstream-data"
}

// plane is one running control plane.
type plane struct {
	tel     *telemetry.Telemetry
	sinks   sinks.Config
	log     *slog.Logger
	emb     *natsserver.Embedded
	store   *eventlog.Store
	views   *projections.Runner
	service *handlers.Service
	clock   clock.Clock
	logs    logHealth
	lead    leaderState // serve_leader.go
	// copies keeps the NATS subscribers' copies of the streams (nil
	// without subscribers).
	copies *natsserver.SubscriberCopies

	// timelines index the slots' phases for the dashboard (serve_dashboard.go).
	timelines *timeline.Index
	// costs is the cost index (projections/cost runner.go): the cost
	// report's and the cost counters' one read of the log.
	costs *cost.Runner
	// poolFile is what became of the pool file last read
	// (serve_poolfile.go); loadPoolFile reads and checks it
	// (pool_power_image.go).
	poolFile     pool.FileReport
	loadPoolFile func(path string) (*pool.Config, error)
}

func runServe(ctx context.Context, o serveOptions) error {
	logOut := o.logOut
	if logOut == nil {
		logOut = os.Stderr
	}
	log, err := newLoggerTo(logOut, o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	if _, err := o.authLimit.trusted(); err != nil {
		return err // before the data dir is touched
	}
	if err := checkGivenTokens(o); err != nil {
		return err
	}
	o.timing = newStartupTimer(log, clock.RealClock{})
	if o.pprof && o.metricsAddress == "" {
		return errPprofWithoutMetrics
	}
	applyMemoryLimit(log) // serve_memlimit.go
	// The pool file is parsed while the plane starts; an invalid one stops
	// the start before the API, the provider or any write when the log
	// holds no pool yet (startup_pool.go), and is reported while serve
	// serves the log's pool otherwise (serve_poolfile.go).
	poolFile := loadPoolAsync(o.config, poolLoader(o.cluster))
	o.poolFile = poolFile
	clk, scenario, err := o.cluster.clusterClock()
	if err != nil {
		return err
	}
	var sinkCfg sinks.Config
	if o.sinks != "" {
		if sinkCfg, err = sinks.LoadConfig(o.sinks); err != nil {
			return err
		}
	}
	tel, err := telemetry.Setup(ctx, telemetry.Options{ServiceName: "claimstream", OTLPEndpoint: o.otlpEndpoint, Prometheus: o.metricsAddress != "", Logger: log})
	if err != nil {
		return fmt.Errorf("telemetry: %w", err)
	}
	budget := newShutdownBudget(o.shutdownTimeout)
	defer func() {
		grace := budget.grace(clock.RealClock{}, stepTelemetry)
		closeWithin(clock.RealClock{}, log, "telemetry", grace, func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
			defer cancel()
			_ = tel.Shutdown(sctx)
		})
	}()
	tel.Metrics.KnownSinks(sinkNames(sinkCfg))
	o.timing.done("telemetry")

	// Stopped in this order (see stopServe), within one budget
	// (--shutdown-timeout): the leader's hand-over first; the intake, so
	// nothing new comes in; the reactors and sinks, given the largest
	// share to finish what they have in flight; the views they read; NATS
	// and telemetry last.
	run := newLifecycle(log)
	run.budget = budget
	intake := run.stage(ctx, "intake (provider, REST API, metrics)")
	views := run.stage(context.WithoutCancel(ctx), "views")
	work := run.stage(context.WithoutCancel(ctx), "reactors and sinks")
	var p *plane
	defer func() {
		stopServe(run, intake, work, views)
		if p != nil {
			closeWithin(clock.RealClock{}, log, "embedded NATS server and the log", budget.grace(clock.RealClock{}, stepNATS), p.emb.Shutdown)
		}
	}()

	// The metrics and the API's health answers are up while the plane
	// starts: a start that waits says why.
	if o.metricsAddress != "" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", tel.Handler())
		if o.pprof {
			mountPprof(mux)
		}
		intake.Go("metrics", func(ctx context.Context) error {
			return rest.ListenAndServe(ctx, o.metricsAddress, mux, o.httpLimits.metrics())
		})
		log.Info("metrics listening", "address", o.metricsAddress+"/metrics")
	}
	pre := &plane{log: log, tel: tel}
	apiTLS, err := pre.apiTLS(o)
	if err != nil {
		return err
	}
	if o.apiAddress != "" {
		// The goroutine gets its own copies: o is changed below while it
		// runs.
		starting, addr, limits := newStartupHealth(), o.apiAddress, o.httpLimits.ServerLimits
		o.starting = starting
		intake.Go("start-up health", func(ctx context.Context) error {
			return starting.run(ctx, func(ctx context.Context, h http.Handler) error {
				return pre.serveAPI(ctx, addr, h, apiTLS, limits)
			})
		})
	}

	o.eventSource = eventSourceOf(ctx, o, log)
	p, err = startPlane(ctx, o, log, clk, tel)
	if err != nil {
		if ctx.Err() != nil {
			log.Info("stopped while starting", "err", err)
			return nil
		}
		return err
	}
	p.sinks = sinkCfg
	cfg, err := poolFile.wait(ctx)
	if err != nil {
		if ctx.Err() != nil || !p.logHoldsPool() {
			return err
		}
		p.poolFileNotApplied(o.config, err)
	}

	gs, err := p.providerServer(o)
	if err != nil {
		return err
	}

	api, err := p.apiHandler(o)
	if err != nil {
		return err
	}

	if api != nil {
		o.starting.handOver()
		intake.Go("REST API", func(ctx context.Context) error {
			return p.serveAPI(ctx, o.apiAddress, api, apiTLS, o.httpLimits.ServerLimits)
		})
		log.Info("REST API listening", "address", o.apiAddress, "tls", o.apiTLSCert != "")
	}
	views.Go("views", p.views.Run)
	views.Go("log health monitor", func(ctx context.Context) error { p.logs.monitor.Run(ctx); return nil })
	intake.Go("pool file, while following", func(ctx context.Context) error { p.followPoolFile(ctx, o.config, o.configPoll); return nil })
	if p.copies != nil {
		views.Go("subscribers' copies", func(ctx context.Context) error { p.copies.Run(ctx, clock.RealClock{}); return nil })
	}
	o.timing.done("listeners started")

	// The leader applies the pool file, then runs the reactors and the
	// pool watcher, for as long as it leads (serve_leader.go).
	pending := newPendingPool(cfg)
	cfg = nil // held by pending until the first term applies it
	// The leadership ends first when serve stops (stopServe): a rolling
	// update hands the lease over while this replica drains its requests.
	leading, stepDown := context.WithCancel(context.Background())
	handedOver := make(chan struct{})
	run.stepDown = func() {
		// The streams' leadership leaves first: the next leader's first
		// writes then find a stream leader instead of an election.
		if p.emb.Clustered() && p.leads() {
			hctx, cancel := context.WithTimeout(context.Background(), time.Second)
			p.handOffStreamLeaders(hctx)
			cancel()
		}
		stepDown()
	}
	run.handedOver = handedOver
	work.Go("leadership", func(ctx context.Context) error {
		defer close(handedOver)
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		defer context.AfterFunc(leading, stop)()
		return p.runLeadership(ctx, o, pending, scenario)
	})
	if err := p.waitForPool(ctx, run.failed()); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		stopServe(run, intake, work, views)
		return fmt.Errorf("serve: %w", run.err())
	}
	o.timing.done("pool file applied")
	// The provider answers only once the pool file is in the views: before
	// that cluster-autoscaler would be told the pool has no groups.
	if gs != nil {
		intake.Go("provider", func(ctx context.Context) error {
			return provider.ListenAndServe(ctx, o.grpcAddress, gs, 5*time.Second)
		})
		log.Info("cluster-autoscaler provider listening", "address", o.grpcAddress, "tls", !o.plaintext, "mtls", o.tlsClientCA != "")
	}

	log.Info("claimstream serving", "config", o.config, "data", o.dataDir, "seq", p.views.Seq())
	select {
	case <-ctx.Done():
		log.Info("shutting down")
	case <-run.failed():
		log.Error("shutting down after a failure", "err", run.err())
	}
	stopServe(run, intake, work, views)
	p.logViewsAtStop()
	if err := run.err(); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

func startPlane(ctx context.Context, o serveOptions, log *slog.Logger, clk clock.Clock, tel *telemetry.Telemetry) (*plane, error) {
	src, err := eventSource(o) // refused before anything is written
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("--data-dir: %w", err)
	}
	ec, err := o.nats.embeddedConfig(o.dataDir, o.stream, o.noFsync, log)
	if err != nil {
		return nil, err
	}
	emb, err := natsserver.StartEmbedded(ec)
	if err != nil {
		return nil, err
	}
	o.timing.done("embedded NATS server and JetStream recovery", "dir", o.dataDir)
	o.nats.logListening(log, emb)
	if clk == nil {
		clk = clock.RealClock{}
	}
	p := &plane{log: log, emb: emb, clock: clk, tel: tel, logs: newLogHealth(emb, log, tel, o.stream), loadPoolFile: poolLoader(o.cluster)}
	ok := false
	defer func() {
		if !ok {
			emb.Shutdown()
		}
	}()
	if err := joinCluster(ctx, emb, log); err != nil {
		return nil, err
	}
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		return nil, err
	}
	js = clusterJetStream(js, emb, log)
	p.store, err = openStoreRetrying(ctx, js, emb, eventlog.StoreConfig{Stream: o.stream, MaxAge: time.Duration(o.retention.retention), Replicas: o.nats.Replicas(), Logger: log, Health: p.logs.health, ReaderName: emb.Server.Name()}, o.nats.restoreBackup, log)
	if err != nil {
		return nil, err
	}
	o.timing.done("event log stream opened", "stream", o.stream)
	if o.storeOpened != nil {
		o.storeOpened(p.store)
	}
	if p.copies, err = emb.SubscriberCopies(log); err != nil {
		return nil, err
	}
	if p.copies != nil {
		// Before anyone can be told the plane is up; kept by Run after.
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if _, err := p.copies.Ensure(cctx); err != nil {
			log.Warn("subscribers' copies of the streams not all in place yet; trying again", "err", err)
		}
		cancel()
	}
	if tel != nil {
		if err := tel.Metrics.ObserveConsumers(consumerUsage(p.store)); err != nil {
			log.Warn("no consumer metrics", "err", err)
		}
		if emb.AuthFailures != nil {
			if err := tel.Metrics.ObserveNATSAccess(natsAccessMetrics(emb, p.copies)); err != nil {
				log.Warn("no NATS access metrics", "err", err)
			}
		}
	}
	resumeSimClock(ctx, clk, p.store, log)
	snaps, err := projections.OpenSnapshotsReplicated(ctx, js, "", p.store.Replicas())
	if err != nil {
		return nil, err
	}
	o.timing.done("snapshot bucket opened")
	ropts := projections.RunnerOptions{Snapshots: snaps, Logger: log, AcceptGaps: o.acceptGaps}
	if err := o.retention.apply(ctx, js, p.store, &ropts, clk); err != nil {
		return nil, err
	}
	if tel != nil {
		ropts.OnEvent = tel.Metrics.OnEvent
	}
	ropts.Writer = p.leads // snapshots and checkpoints: the leader's
	p.views = projections.NewRunner(p.store, ropts)
	o.starting.watch(p.views)
	if err := p.registerProjections(ctx, o); err != nil {
		return nil, err
	}
	if o.poolFile != nil {
		if err := o.poolFile.parsed(ctx); err != nil {
			return nil, err
		}
		o.timing.done("pool file parsed (beside the phases above)", "file", o.config, "parse_took", o.poolFile.took.Round(time.Millisecond))
	}
	if err := p.views.Start(ctx); err != nil {
		return nil, err
	}
	o.timing.done("views built (snapshot load and catch-up)", "seq", p.views.Seq(), "snapshot", p.views.SnapshotSeq())
	p.service = handlers.NewService(p.store, p.views, p.clock, src, log)
	if err := p.startLeadership(ctx, o); err != nil {
		return nil, err
	}
	if tel != nil {
		tel.Metrics.ObserveViews(p.views)
		tel.Metrics.SetClock(p.clock)
		if err := tel.Metrics.ObserveStore(p.store); err != nil {
			return nil, err
		}
		tel.InstrumentService(p.service)
		tel.Metrics.ObserveCost(p.costs, p.clock)
		tel.Metrics.ObserveIndexHistory("cost", p.costs)
		if p.timelines != nil {
			tel.Metrics.ObserveIndexHistory("timeline", p.timelines)
		}
	}
	ok = true
	return p, nil
}

// providerServer builds the externalgrpc server from the flags: TLS unless
// --plaintext is given, mTLS with --tls-client-ca.
func (p *plane) providerServer(o serveOptions) (*grpc.Server, error) {
	if o.grpcAddress == "" {
		return nil, nil
	}
	var creds credentials.TransportCredentials
	switch {
	case o.plaintext && (o.tlsCert != "" || o.tlsKey != ""):
		return nil, fmt.Errorf("--plaintext and --tls-cert/--tls-key exclude each other")
	case o.plaintext:
	case o.tlsCert == "" || o.tlsKey == "":
		return nil, fmt.Errorf("--grpc-address %s needs --tls-cert and --tls-key (or --plaintext to serve without TLS, or --grpc-address \"\" for no provider)", o.grpcAddress)
	default:
		var err error
		creds, err = provider.ServerCredentials(provider.TLSConfig{CertFile: o.tlsCert, KeyFile: o.tlsKey, ClientCAFile: o.tlsClientCA, Logger: p.log, OnReloadFailure: p.tlsReloadFailed})
		if err != nil {
			return nil, fmt.Errorf("provider TLS: %w", err)
		}
	}
	srv := provider.New(p.views, p.service, p.clock, provider.Options{Logger: p.log, LogHealth: p.logs.health})
	var extra []grpc.ServerOption
	if p.tel != nil {
		extra = append(extra, p.tel.GRPCServerOption())
	}
	extra = append(extra, grpc.ChainUnaryInterceptor(provider.FreshReads(p.lead.leadership.FreshReads)))
	return provider.NewGRPCServer(srv, creds, o.plaintext, extra...)
}

// apiToken is the REST API's token: --api-token, $CLAIMSTREAM_API_TOKEN,
// or the token file, generated (0600) on the first start so a local CLI
// can read it. A token given shorter than minAPITokenLength is refused.
func apiToken(o serveOptions) (string, error) {
	if o.apiToken != "" {
		return strongToken("--api-token", o.apiToken)
	}
	if t := os.Getenv("CLAIMSTREAM_API_TOKEN"); t != "" {
		return strongToken("$CLAIMSTREAM_API_TOKEN", t)
	}
	path := o.apiTokenFile
	if path == "" {
		path = filepath.Join(o.dataDir, apiTokenFile)
	}
	if b, err := os.ReadFile(path); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return strongToken("the API token in "+path, t)
		}
		return "", fmt.Errorf("--api-token-file %s is empty", path)
	} else if !errors.Is(err, os.ErrNotExist) || o.apiTokenFile != "" {
		return "", fmt.Errorf("--api-token-file: %w", err)
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	t := hex.EncodeToString(raw[:])
	if err := writeTokenFile(path, t); err != nil {
		return "", fmt.Errorf("write the API token: %w", err)
	}
	return t, nil
}

// writeTokenFile writes the token whole or not at all (a temporary file
// renamed over path): a reader, or the next start after a crash, never
// finds the file empty.
func writeTokenFile(path, token string) error {
	dir, prefix := filepath.Dir(path), "."+filepath.Base(path)+"-"
	f, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	// A start killed while it wrote the token left its temporary file
	// behind, holding a token nobody uses; one serve owns the data dir,
	// so every other such file is stale.
	if entries, err := os.ReadDir(dir); err == nil {
		for _, e := range entries {
			if name := filepath.Join(dir, e.Name()); strings.HasPrefix(e.Name(), prefix) && name != f.Name() && e.Type().IsRegular() {
				_ = os.Remove(name)
			}
		}
	}
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

const apiTokenFile = "api-token"

func (p *plane) apiHandler(o serveOptions) (http.Handler, error) {
	if o.apiAddress == "" {
		return nil, nil
	}
	token, err := apiToken(o)
	if err != nil {
		return nil, err
	}
	readToken, err := o.apiReadToken.resolve(token)
	if err != nil {
		return nil, err
	}
	ro := rest.Options{Token: token, ReadToken: readToken, Logger: p.log, LogHealth: p.logs.health, DeadLetters: p.deadLetters(), Sinks: sinkNames(p.sinks), FreshReads: p.lead.leadership.FreshReads,
		MaxWhatIfs: o.maxWhatIfs, PoolFile: &p.poolFile}
	if ro.AuthLimit, err = p.authLimiter(o.authLimit); err != nil {
		return nil, err
	}
	if p.tel != nil {
		ro.OnBackup = p.tel.Metrics.BackupDone
	}
	return p.withDashboard(ro, token)
}

// applyPool reconciles the log with a pool file, one group per decision
// under the group's lock (pool.Applier).
func (p *plane) applyPool(ctx context.Context, cfg *pool.Config) error {
	a := &pool.Applier{Service: p.service, Views: p.views, Clock: p.clock, Log: p.log}
	res, err := a.Apply(ctx, cfg)
	if err != nil {
		err = fmt.Errorf("apply %s: %w", cfg.Source, err)
		if termEndingFault(err) {
			p.poolApplied(telemetry.PoolFileStopped, err)
		} else if !errors.Is(err, context.Canceled) {
			p.poolApplied(telemetry.PoolFileRefused, err)
			p.poolFile.Set(cfg.Source, pool.ReasonRefused, err, p.clock.Now())
		}
		return err
	}
	p.poolApplied("", nil)
	p.poolFile.Set(cfg.Source, "", nil, p.clock.Now())
	if res.Events > 0 {
		p.log.Info("pool file applied", "file", cfg.Source, "groups", res.Groups, "events", res.Events, "seq", res.Last)
	}
	return nil
}

// poolApplied counts the outcome of one read or apply of the pool file in
// the metrics (reason: telemetry.PoolFileReasons).
func (p *plane) poolApplied(reason string, err error) {
	if p.tel != nil && !errors.Is(err, context.Canceled) {
		p.tel.Metrics.PoolApplied(reason, err)
	}
}

// watchPool re-applies the pool file when it changes or on SIGHUP. A file
// that does not load, or that the log refuses, is reported and changes
// nothing.
func (p *plane) watchPool(ctx context.Context, path string, every time.Duration) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	last := stampOf(path)
	if p.poolFile.Refused() {
		// Read again at the first tick: the file may have been fixed
		// between the read that refused it and now.
		last = fileStamp{}
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-t.C:
			m := stampOf(path)
			if m.equal(last) {
				continue
			}
			last = m
		}
		cfg, err := p.loadPoolFile(path)
		if err != nil {
			p.poolFileNotApplied(path, err)
			continue
		}
		if err := p.applyPool(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
			p.log.Error("pool file not applied", "err", err)
		}
	}
}

// loadPool reads the pool file without checking it against serve's flags
// (plane.loadPoolFile does).
func loadPool(path string) (*pool.Config, error) { return pool.Load(path) }

// fileStamp tells one version of a file from the next: its modification
// time and size, so a rewrite within the file system's timestamp tick is
// still seen when its size changes. The zero stamp is a file not there.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}
}

func (s fileStamp) equal(o fileStamp) bool { return s.mod.Equal(o.mod) && s.size == o.size }
