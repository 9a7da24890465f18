package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
	"github.com/claimstream/claimstream/projections/timeline"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// BenchmarkServeStart measures `claimstream serve` as a process: from exec
// to the provider answering NodeGroups over loopback gRPC, and its memory
// (VmRSS and VmHWM of /proc/PID/status) once it is serving (pool file
// applied, every listener up). The
// data dir holds a pool of 10,000 slots in 100 groups (applied by serve
// itself), then claim lifecycles with their power facts up to
// CLAIMSTREAM_BENCH_EVENTS events (default 100,000), and a snapshot at the
// log's end, as a plane that ran writes one every 10,000 events. It is
// built once and kept under the temp dir.
//
// CLAIMSTREAM_BENCH_API=1 runs serve with its REST API (and so the
// dashboard's timeline index, which folds the log at start);
// CLAIMSTREAM_BENCH_STEADY=5m keeps each serve running that long after it
// serves, the simulated cluster at work, and reports its VmRSS at the end
// (steady-rss-MiB), its highest VmRSS read every 10 s (max-rss-MiB), and
// the median and highest of those read from settledAfter on
// (settled-rss-MiB, settled-max-rss-MiB). Each run prints RssAnon and
// RssFile too. CLAIMSTREAM_BENCH_PPROF=DIR runs serve with --pprof and
// writes its heap profiles once serving and at the steady run's end to
// DIR, and prints the Go runtime's account of its memory at the end.
// CLAIMSTREAM_BENCH_SERVE_ARGS adds flags to serve (such as
// --checkpoint-every=5000).
// CLAIMSTREAM_BENCH_BASELINE=BINARY runs that build of claimstream before
// this one in each round, reports its medians prefixed base- and the
// ratios of this build's to the baseline's (hwm-ratio, rss-ratio,
// start-ratio; settled-rss-ratio and cpu-ratio with a steady run).
//
//	go test ./internal/serve -run '^$' -bench ServeStart -benchtime 3x
//	CLAIMSTREAM_BENCH_API=1 CLAIMSTREAM_BENCH_STEADY=5m go test ./internal/serve -run '^$' -bench ServeStart -benchtime 1x
func BenchmarkServeStart(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("CLAIMSTREAM_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	bin := buildClaimstream(b)
	root := filepath.Join(os.TempDir(), fmt.Sprintf("claimstream-serve-bench-v4-%d", n))
	poolFile, data := filepath.Join(root, "pool.yaml"), filepath.Join(root, "data")
	if _, err := os.Stat(filepath.Join(root, "complete")); err != nil {
		buildServeBenchDir(b, bin, root, poolFile, data, n)
	}
	var m serveBenchMode
	m.api = os.Getenv("CLAIMSTREAM_BENCH_API") == "1"
	if v := os.Getenv("CLAIMSTREAM_BENCH_STEADY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("CLAIMSTREAM_BENCH_STEADY: %v", err)
		}
		m.steady = d
	}
	m.profiles = os.Getenv("CLAIMSTREAM_BENCH_PPROF")
	if m.profiles != "" {
		// serve writes its profiles there: a missing directory failed a
		// run only after serve had started.
		if err := os.MkdirAll(m.profiles, 0o755); err != nil {
			b.Fatalf("CLAIMSTREAM_BENCH_PPROF: %v", err)
		}
	}
	baseline := os.Getenv("CLAIMSTREAM_BENCH_BASELINE")
	var this, base serveRuns
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.run = i + 1
		if baseline != "" {
			// The baseline first, then this build, in each round: the two
			// see the same machine at the same time.
			base.add(b, "baseline", startServeProcess(b, baseline, poolFile, data, m), m)
		}
		this.add(b, "this build", startServeProcess(b, bin, poolFile, data, m), m)
	}
	b.StopTimer()
	this.report(b, "", m)
	if baseline != "" {
		base.report(b, "base-", m)
		b.ReportMetric(median(this.hwm)/median(base.hwm), "hwm-ratio")
		b.ReportMetric(median(this.rss)/median(base.rss), "rss-ratio")
		b.ReportMetric(float64(median(this.starts))/float64(median(base.starts)), "start-ratio")
		if m.steady > 0 {
			b.ReportMetric(median(this.settledRSS)/median(base.settledRSS), "settled-rss-ratio")
			b.ReportMetric(median(this.cpu)/median(base.cpu), "cpu-ratio")
		}
	}
}

// serveRuns gathers the figures of the runs of one binary.
type serveRuns struct {
	starts, costReady                                         []time.Duration
	rss, hwm, steady, maxRSS, settledRSS, settledMax, costHWM []float64
	cpu                                                       []float64
}

func (r *serveRuns) add(b *testing.B, which string, run serveRun, m serveBenchMode) {
	b.Helper()
	r.starts = append(r.starts, run.answered)
	r.rss, r.hwm = append(r.rss, run.rssMiB), append(r.hwm, run.hwmMiB)
	r.steady, r.maxRSS = append(r.steady, run.steadyMiB), append(r.maxRSS, run.maxMiB)
	r.settledRSS, r.settledMax = append(r.settledRSS, run.settledMedianMiB), append(r.settledMax, run.settledMaxMiB)
	r.costReady, r.costHWM = append(r.costReady, run.costReady), append(r.costHWM, run.costHWMMiB)
	r.cpu = append(r.cpu, run.cpuSeconds)
	// Printed, not logged: a benchmark's log is cut to a few lines.
	fmt.Printf("run %d (%s): provider answered after %v; VmRSS %.0f MiB (%s), VmHWM %.0f MiB\n%s\n", m.run, which, run.answered.Round(time.Millisecond), run.rssMiB, run.rssParts, run.hwmMiB, run.phases)
	if m.steady > 0 {
		fmt.Printf("run %d (%s): after %v serving: VmRSS %.0f MiB (%s; highest %.0f MiB; from %v on: median %.0f MiB, highest %.0f MiB); CPU %.1f s\n", m.run, which, m.steady, run.steadyMiB, run.steadyParts, run.maxMiB, settledAfter, run.settledMedianMiB, run.settledMaxMiB, run.cpuSeconds)
	}
}

// report reports the medians, their names prefixed with prefix.
func (r *serveRuns) report(b *testing.B, prefix string, m serveBenchMode) {
	b.ReportMetric(float64(median(r.starts).Milliseconds()), prefix+"start-ms")
	b.ReportMetric(median(r.rss), prefix+"rss-MiB")
	b.ReportMetric(median(r.hwm), prefix+"hwm-MiB")
	b.ReportMetric(float64(median(r.costReady).Milliseconds()), prefix+"cost-ready-ms")
	b.ReportMetric(median(r.costHWM), prefix+"cost-hwm-MiB")
	if m.steady > 0 {
		b.ReportMetric(median(r.steady), prefix+"steady-rss-MiB")
		b.ReportMetric(median(r.maxRSS), prefix+"max-rss-MiB")
		b.ReportMetric(median(r.settledRSS), prefix+"settled-rss-MiB")
		b.ReportMetric(median(r.settledMax), prefix+"settled-max-rss-MiB")
	}
}

// serveBenchMode is how the benchmark runs serve.
type serveBenchMode struct {
	api    bool          // with the REST API (and the timeline index)
	steady time.Duration // how long to keep serve running once it serves
	// profiles, when set (CLAIMSTREAM_BENCH_PPROF), is a directory the heap
	// profiles once serving and at the steady run's end are written to.
	profiles string
	run      int
}

// saveHeapProfile writes serve's heap profile (serve --pprof) to
// m.profiles as run<N>-<when>.pb.gz.
func (m serveBenchMode) saveHeapProfile(b *testing.B, metrics, when string) {
	b.Helper()
	if m.profiles == "" {
		return
	}
	// gc=1: what is live now, not at the last collection (with a heap
	// that grows slowly, that may be the start's).
	resp, err := http.Get("http://" + metrics + "/debug/pprof/heap?gc=1")
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatalf("heap profile: %v", err)
	}
	if err := os.WriteFile(filepath.Join(m.profiles, fmt.Sprintf("run%d-%s.pb.gz", m.run, when)), body, 0o644); err != nil {
		b.Fatal(err)
	}
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// buildClaimstream builds the command into the benchmark's temp dir: the
// process measured is the real binary, not a test binary.
func buildClaimstream(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "claimstream")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/claimstream/claimstream/cmd/claimstream").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serveBenchPool is a pool file of 10,000 slots in 100 groups, each slot
// with an address, a label and a capacity. (Pod specs on every slot would
// pass the pool file's bound of 262,144 YAML values at this size.)
func serveBenchPool() string {
	var w strings.Builder
	w.WriteString("groups:\n")
	for g := range 100 {
		fmt.Fprintf(&w, "  - name: g%d\n", g)
	}
	w.WriteString("slots:\n")
	for s := range 10_000 {
		fmt.Fprintf(&w, "  - {name: node-%d.lan, group: g%d, address: 10.0.%d.%d, labels: {claimstream.dev/rack: r%d}, capacity: {cpu: \"8\", memory: 32Gi}}\n",
			s, s%100, s/256, s%256, s%10)
	}
	return w.String()
}

// buildServeBenchDir writes the pool file, lets serve apply it, appends
// claim lifecycles up to n events and writes a snapshot at the end.
func buildServeBenchDir(b *testing.B, bin, root, poolFile, data string, n int) {
	b.Helper()
	began := time.Now()
	if err := os.RemoveAll(root); err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(data, 0o750); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(poolFile, []byte(serveBenchPool()), 0o644); err != nil {
		b.Fatal(err)
	}
	first := startServeProcess(b, bin, poolFile, data, serveBenchMode{})
	b.Logf("first start (pool of 10,000 slots applied) in %v\n%s", first.serving.Round(time.Millisecond), first.phases)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: data, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer emb.Shutdown()
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		b.Fatal(err)
	}
	st, err := eventlog.OpenStore(ctx, js, eventlog.StoreConfig{Stream: "CLAIMSTREAM"})
	if err != nil {
		b.Fatal(err)
	}
	last, err := st.LastSeq(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := appendClaimLifecycles(ctx, st, n-int(last)); err != nil {
		b.Fatal(err)
	}
	snaps, err := projections.OpenSnapshots(ctx, js, "")
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	views := projections.NewRunner(st, projections.RunnerOptions{Snapshots: snaps, Logger: quiet})
	// The projections serve registers, so the snapshot holds their parts
	// as serve's own would.
	if _, err := cost.NewRunner(ctx, views, st, ""); err != nil {
		b.Fatal(err)
	}
	if _, err := timeline.NewIndex(ctx, views, st, ""); err != nil {
		b.Fatal(err)
	}
	if err := views.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := views.SnapshotNow(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("data dir of %d events built in %v (snapshot at seq %d)", views.Seq(), time.Since(began).Round(time.Millisecond), views.SnapshotSeq())
	if err := os.WriteFile(filepath.Join(root, "complete"), nil, 0o644); err != nil {
		b.Fatal(err)
	}
}

// appendClaimLifecycles appends about n events: whole claim lifecycles
// (created, booting, powered on, ready, scale-down, shutdown, powered off,
// completed, collected) on the pool's slots in turn, in the past, with a
// bounded number in flight. The power facts are what serve's node
// observer writes for every boot and shutdown; they make the cost index
// hold its spans, as it does in a real pool (the data dir's v1 had none).
func appendClaimLifecycles(ctx context.Context, st *eventlog.Store, n int) error {
	pub := eventstest.NewBoundedPublisher(st.JetStream(), 0)
	subj := st.Subjects()
	at := time.Now().Add(-time.Duration(n+1) * time.Second).UTC()
	count := 0
	emit := func(d events.Data) error {
		at = at.Add(time.Second)
		m, err := eventlog.ToMsg(events.Event{ID: fmt.Sprintf("bench-%d", count), Time: at, Data: d}, subj.Subject(events.AggregateOf(d), d.EventType()))
		if err != nil {
			return err
		}
		count++
		return pub.Publish(ctx, m)
	}
	for i := 0; count+9 <= n; i++ {
		s := i % 10_000
		r := events.Ref{Claim: fmt.Sprintf("node-%d.lan-%06x", s, i), Slot: fmt.Sprintf("node-%d.lan", s), Group: fmt.Sprintf("g%d", s%100), Attempt: 1, Cause: "IncreaseSize(+1) by cluster-autoscaler"}
		for _, d := range []events.Data{
			events.ClaimCreated{Ref: r, RequestedAt: at, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallIncreaseSize, Delta: 1, Group: r.Group},
				DeadlineAt: at.Add(projections.DefaultBudget), Budget: events.Duration(projections.DefaultBudget), TTL: events.Duration(time.Hour)},
			events.ClaimBooting{Ref: r, StartupJob: r.Claim + "-start-1"},
			events.MachinePoweredOn{Ref: r, Node: r.Slot, At: at.Add(3 * time.Second), AtSource: events.AtObserved},
			events.ClaimReady{Ref: r, Node: r.Slot},
			events.ScaleDownRequested{Ref: r, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Group: r.Group, Nodes: []string{r.Slot}}},
			events.ShutdownFired{Ref: r, Job: r.Claim + "-stop-1", ShutdownAttempt: 1},
			events.MachinePoweredOff{Ref: r, Node: r.Slot, At: at.Add(7 * time.Second), AtSource: events.AtObserved, Reason: events.PowerOffShutdown},
			events.ClaimCompleted{Ref: r, Reason: projections.ReasonScaledDown},
			events.ClaimCollected{Ref: r},
		} {
			if err := emit(d); err != nil {
				return err
			}
		}
	}
	return pub.Flush(ctx)
}

// settledAfter is when the benchmark's steady readings count as
// serving's: past the Go runtime's forced collection, at most two minutes
// after the last one, so the heap's goal is set from what serving holds
// rather than from the start's reads.
const settledAfter = 150 * time.Second

// serveRun is one measured start of serve.
type serveRun struct {
	answered time.Duration // exec to NodeGroups answering with 100 groups
	serving  time.Duration // exec to serving
	rssMiB   float64       // VmRSS once serving
	hwmMiB   float64       // VmHWM (peak RSS) once serving
	phases   string        // the start-up phase lines
	// costReady is exec to "views built" (the cost index is built with the
	// views); costHWMMiB the VmHWM then.
	costReady  time.Duration
	costHWMMiB float64

	// With serveBenchMode.steady: VmRSS at its end, the highest VmRSS
	// read every 10 s until then, and the process's CPU time.
	steadyMiB, maxMiB, cpuSeconds float64
	// settledMedianMiB and settledMaxMiB are the median and the highest of
	// the VmRSS read every 10 s from settledAfter on: serving's memory,
	// not one reading's luck (a copy of an index saved as it is read).
	settledMedianMiB, settledMaxMiB float64
	// rssParts and steadyParts: RssAnon and RssFile once serving and at
	// the steady run's end.
	rssParts, steadyParts string
}

// startServeProcess runs serve on data until it serves, measures it, and
// stops it with SIGTERM.
func startServeProcess(b *testing.B, bin, poolFile, data string, m serveBenchMode) serveRun {
	b.Helper()
	addr, api, metrics := freeAddr(b), "", ""
	if m.api {
		api = freeAddr(b)
	}
	args := []string{"serve", "--config", poolFile, "--data-dir", data, "--grpc-address", addr, "--plaintext",
		"--api-address=" + api, "--config-poll", "1h", "--log-level", "info"}
	if m.profiles != "" {
		metrics = freeAddr(b)
		args = append(args, "--metrics-address="+metrics, "--pprof")
	} else {
		args = append(args, "--metrics-address=")
	}
	args = append(args, strings.Fields(os.Getenv("CLAIMSTREAM_BENCH_SERVE_ARGS"))...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	var phases, tail []string
	serving := make(chan struct{})
	scanned := make(chan struct{})
	costReady := make(chan struct{})
	var costBuilt time.Duration // under mu
	began := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			if strings.Contains(line, `msg="views built"`) && costBuilt == 0 {
				costBuilt = time.Since(began)
				close(costReady)
			}
			if strings.Contains(line, `msg="start-up phase"`) || strings.Contains(line, "views built") || strings.Contains(line, "loaded snapshot") ||
				strings.Contains(line, "cost index") || strings.Contains(line, "timeline index") {
				phases = append(phases, line)
			}
			tail = append(tail, line)
			if len(tail) > 20 {
				tail = tail[1:]
			}
			mu.Unlock()
			// The memory is read once serve serves: the pool file applied,
			// every listener up.
			if strings.Contains(line, `msg="claimstream serving"`) {
				once.Do(func() { close(serving) })
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	exited := make(chan struct{}) // closed once serve exited, with waitErr set
	var waitErr error
	go func() { <-scanned; waitErr = cmd.Wait(); close(exited) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
	b.Cleanup(stop)
	lines := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(tail, "\n")
	}

	// Connect attempts every few milliseconds: gRPC's default backoff
	// (1s and growing) would add its own wait to the figure.
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1, MaxDelay: 5 * time.Millisecond}, MinConnectTimeout: time.Second}))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	client := pb.NewCloudProviderClient(cc)
	var run serveRun
	eventstest.CheckFor(b, 5*time.Minute, 5*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := client.NodeGroups(ctx, &pb.NodeGroupsRequest{})
		cancel()
		if err == nil && len(r.GetNodeGroups()) == 100 {
			run.answered = time.Since(began)
			return nil
		}
		select {
		case <-exited:
			b.Fatalf("serve exited before answering: %v\n%s", waitErr, lines())
		default:
		}
		// The log is read only if the wait fails: not on every try.
		return lazyError(func() string {
			return fmt.Sprintf("serve does not answer NodeGroups with 100 groups (last: %d groups, %v)\n%s", len(r.GetNodeGroups()), err, lines())
		})
	})
	select {
	case <-serving:
		run.serving = time.Since(began)
	case <-exited:
		b.Fatalf("serve exited: %v\n%s", waitErr, lines())
	case <-time.After(5 * time.Minute):
		b.Fatalf("serve did not apply the pool file in 5m\n%s", lines())
	}
	run.rssMiB, run.hwmMiB = procMemory(b, cmd.Process.Pid)
	run.rssParts = procRSSParts(b, cmd.Process.Pid)
	m.saveHeapProfile(b, metrics, "serving")
	if m.steady > 0 {
		servedAt := time.Now()
		end := servedAt.Add(m.steady)
		run.maxMiB = run.rssMiB
		var settled []float64
		for time.Now().Before(end) {
			select {
			case <-exited:
				b.Fatalf("serve exited while running: %v\n%s", waitErr, lines())
			case <-time.After(min(10*time.Second, time.Until(end))):
			}
			run.steadyMiB, _ = procMemory(b, cmd.Process.Pid)
			run.maxMiB = max(run.maxMiB, run.steadyMiB)
			if time.Since(servedAt) >= settledAfter {
				settled = append(settled, run.steadyMiB)
			}
		}
		if len(settled) > 0 {
			run.settledMedianMiB, run.settledMaxMiB = median(settled), slices.Max(settled)
		}
		run.cpuSeconds = procCPUSeconds(b, cmd.Process.Pid)
		run.steadyParts = procRSSParts(b, cmd.Process.Pid)
		if metrics != "" {
			run.steadyParts += "; " + goMemory(b, metrics)
		}
		m.saveHeapProfile(b, metrics, "steady")
	}
	select {
	case <-costReady:
		_, run.costHWMMiB = procMemory(b, cmd.Process.Pid)
	case <-exited:
		b.Fatalf("serve exited: %v\n%s", waitErr, lines())
	case <-time.After(5 * time.Minute):
		b.Fatalf("serve did not build the cost index in 5m\n%s", lines())
	}
	stop()
	mu.Lock()
	run.costReady = costBuilt
	run.phases = strings.Join(phases, "\n")
	mu.Unlock()
	return run
}

// procCPUSeconds reads the user and system CPU time of a process from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s).
func procCPUSeconds(b *testing.B, pid int) float64 {
	b.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count from its ")".
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %v %v", pid, err1, err2)
	}
	return (utime + stime) / 100
}

// procStatusKiB reads the sizes of /proc/PID/status (the lines in kB,
// such as VmRSS, VmHWM, RssAnon and RssFile), in KiB by name.
func procStatusKiB(tb testing.TB, pid int) map[string]float64 {
	tb.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		tb.Fatal(err)
	}
	sizes := map[string]float64{}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || !strings.HasSuffix(v, " kB") {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			tb.Fatalf("%s: %v", line, err)
		}
		sizes[k] = kb
	}
	return sizes
}

// procRSSParts is the RssAnon and RssFile of a process, as in
// /proc/PID/status: the heap and stacks against the binary's pages.
func procRSSParts(b *testing.B, pid int) string {
	b.Helper()
	kib := procStatusKiB(b, pid)
	return fmt.Sprintf("RssAnon %.0f MiB, RssFile %.0f MiB", kib["RssAnon"]/1024, kib["RssFile"]/1024)
}

// goMemory is where the Go runtime of serve says its memory is, from the
// metrics endpoint's go_memstats: the heap's spans in use, its free spans
// not yet returned to the system, the goroutines' stacks, the runtime's
// own structures, and the heap size at which the next collection starts.
func goMemory(b *testing.B, metrics string) string {
	b.Helper()
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		b.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	v := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "go_memstats_") {
			continue
		}
		if f, err := strconv.ParseFloat(value, 64); err == nil {
			v[strings.TrimPrefix(name, "go_memstats_")] = f / (1 << 20)
		}
	}
	if err := sc.Err(); err != nil {
		b.Fatalf("metrics: %v", err)
	}
	runtime := v["mspan_inuse_bytes"] + v["mcache_inuse_bytes"] + v["buck_hash_sys_bytes"] + v["gc_sys_bytes"] + v["other_sys_bytes"]
	return fmt.Sprintf("Go heap in use %.0f MiB, free and kept %.0f MiB, stacks %.0f MiB, runtime %.0f MiB, next collection at %.0f MiB",
		v["heap_inuse_bytes"], v["heap_idle_bytes"]-v["heap_released_bytes"], v["stack_inuse_bytes"], runtime, v["next_gc_bytes"])
}

// procMemory reads VmRSS and VmHWM (MiB) of a process.
func procMemory(b *testing.B, pid int) (rss, hwm float64) {
	b.Helper()
	kib := procStatusKiB(b, pid)
	return kib["VmRSS"] / 1024, kib["VmHWM"] / 1024
}

// lazyError is an error whose text is made only when it is read.
type lazyError func() string

func (e lazyError) Error() string { return e() }
