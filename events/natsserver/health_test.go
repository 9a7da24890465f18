package natsserver_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
)

// logOnDisk is a server with fsync on (as serve runs it), a store with a
// health flag, and a monitor on a fake clock: the test steps the clock to
// make the monitor look.
type logOnDisk struct {
	emb     *natsserver.Embedded
	store   *eventlog.Store
	health  *eventlog.LogHealth
	monitor *natsserver.LogMonitor
	clk     *clocktesting.FakeClock
	acked   map[string]uint64 // event id -> seq of every acknowledged append
}

func startLogOnDisk(t *testing.T, dir string, opts natsserver.LogMonitorOptions) *logOnDisk {
	t.Helper()
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	l := &logOnDisk{emb: emb, clk: clocktesting.NewFakeClock(eventstest.T0), acked: map[string]uint64{}}
	l.health = eventlog.NewLogHealth(l.clk.Now())
	js, err := jetstream.New(emb.Conn)
	if err != nil {
		t.Fatal(err)
	}
	l.store, err = eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{Health: l.health})
	if err != nil {
		t.Fatal(err)
	}
	opts.Clock = l.clk
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	l.monitor = natsserver.NewLogMonitor(emb, l.health, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); l.monitor.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// append writes one ClaimCreated on a fresh slot, with a cause of pad
// bytes, and remembers it when acknowledged.
func (l *logOnDisk) append(ctx context.Context, n, pad int) error {
	ev := eventstest.Created(fmt.Sprintf("slot-%d", n), fmt.Sprintf("claim-%d", n))
	if pad > 0 {
		d := ev.Data.(events.ClaimCreated)
		d.Cause = strings.Repeat("x", pad)
		ev.Data = d
	}
	res, err := l.store.Append(ctx, events.SlotAggregate(fmt.Sprintf("slot-%d", n)), 0, ev)
	if err == nil {
		l.acked[res.Events[0].ID] = res.Last
	}
	return err
}

// checkAcknowledged: every acknowledged event is in the log, at its seq.
func (l *logOnDisk) checkAcknowledged(t *testing.T) {
	t.Helper()
	got := map[string]uint64{}
	for _, e := range eventstest.ReadAll(t, l.store) {
		got[e.ID] = e.Seq
	}
	for id, seq := range l.acked {
		if got[id] != seq {
			t.Errorf("acknowledged event %s at seq %d: the log has it at %d", id, seq, got[id])
		}
	}
}

func waitWritable(t *testing.T, l *logOnDisk, want bool) eventlog.LogStatus {
	t.Helper()
	var st eventlog.LogStatus
	eventstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		l.clk.Step(time.Second)
		st = l.health.Status()
		if st.Writable != want {
			return fmt.Errorf("log writable=%v (%s), want %v", st.Writable, st.Reason, want)
		}
		return nil
	})
	return st
}

// The data dir fills up: the monitor sees it, appends are refused at once
// with the reason, and once space is freed the log takes writes again
// without a restart; nothing acknowledged is lost.
func TestDiskFullIsRefusedFastAndRecoversWithoutRestart(t *testing.T) {
	dir := eventstest.MountTmpfs(t, "size=4m")
	l := startLogOnDisk(t, dir, natsserver.LogMonitorOptions{MinFree: 64 << 10})
	ctx := context.Background()
	for i := range 20 {
		if err := l.append(ctx, i, 0); err != nil {
			t.Fatal(err)
		}
	}

	filler := filepath.Join(dir, "filler")
	eventstest.FillDisk(t, filler)
	st := waitWritable(t, l, false)
	for _, want := range []string{"no space left on device", dir, "bytes free"} {
		if !strings.Contains(st.Reason, want) {
			t.Errorf("reason %q does not say %q", st.Reason, want)
		}
	}
	start := time.Now()
	err := l.append(ctx, 100, 0)
	if !errors.Is(err, eventlog.ErrLogUnwritable) || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("append on a full disk: got %v, want ErrLogUnwritable saying no space", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("the refusal took %v, want at once", took)
	}
	if n := l.health.WriteFailures()[eventlog.WriteFailureUnwritable]; n == 0 {
		t.Errorf("write failures %v: the refusal is not counted", l.health.WriteFailures())
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitWritable(t, l, true)
	for i := 200; i < 210; i++ {
		if err := l.append(ctx, i, 0); err != nil {
			t.Fatalf("append after space came back: %v", err)
		}
	}
	l.checkAcknowledged(t)
}

// An append that meets ENOSPC in the server (the monitor's margin was not
// enough) leaves the file store refusing every later write and the server
// silent. The monitor reads the server's verdict, the pending append ends
// with the reason instead of at its deadline (a refusal when the stream
// refuses its resend, else its outcome is unknown: it was sent), and
// after space is freed a restart of JetStream inside the running server
// takes writes again.
func TestWriteErrorInTheServerIsDetectedAndRecovered(t *testing.T) {
	dir := eventstest.MountTmpfs(t, "size=4m")
	l := startLogOnDisk(t, dir, natsserver.LogMonitorOptions{MinFree: 1, RestartAfter: 10 * time.Second})
	ctx := context.Background()
	for i := range 20 {
		if err := l.append(ctx, i, 0); err != nil {
			t.Fatal(err)
		}
	}
	filler := filepath.Join(dir, "filler")
	eventstest.FillDisk(t, filler)
	// Give back a little room, less than one padded event needs: statfs
	// shows space, the write does not fit.
	if err := os.Truncate(filler, mustSize(t, filler)-8<<10); err != nil {
		t.Fatal(err)
	}
	// The server never answers this append; the monitor's next look ends
	// it with the reason, long before the caller's 30 s deadline.
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	appended := make(chan error, 1)
	go func() { appended <- l.append(actx, 100, 64<<10) }()
	var err error
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		l.clk.Step(time.Second)
		select {
		case err = <-appended:
			return nil
		default:
			return errors.New("the append is still waiting")
		}
	})
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the failed append took %v", took)
	}
	if !errors.Is(err, eventlog.ErrLogUnwritable) && !errors.Is(err, eventlog.ErrOutcomeUnknown) || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("append on a full disk: got %v, want ErrLogUnwritable or ErrOutcomeUnknown naming the dir and no space", err)
	}
	if n := l.health.WriteFailures()[eventlog.WriteFailureUnwritable]; n == 0 {
		t.Errorf("write failures %v", l.health.WriteFailures())
	}
	// Until space is freed every append is refused at once.
	start = time.Now()
	if err := l.append(ctx, 101, 0); !errors.Is(err, eventlog.ErrLogUnwritable) && err != nil {
		t.Fatalf("append while unwritable: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("append while unwritable took %v", took)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitWritable(t, l, true)
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		return l.append(ctx, 300, 0)
	})
	l.checkAcknowledged(t)
}

func mustSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
