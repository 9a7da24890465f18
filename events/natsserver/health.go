package natsserver

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"golang.org/x/sys/unix"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events/eventlog"
)

// LogMonitorOptions configure a LogMonitor.
type LogMonitorOptions struct {
	// MinFree is the free space below which the data dir counts as full
	// and appends are refused before they reach the disk (default 1 MiB):
	// a write that meets ENOSPC leaves the file store refusing every later
	// write until JetStream is restarted.
	MinFree uint64
	// Every is the interval between checks (default 1s); a failed append
	// triggers one at once.
	Every time.Duration
	// RestartAfter is how long a fault that a restart would cure is seen
	// before JetStream is restarted, and the least time between two
	// restarts (default 5s): the requests in flight when the fault showed
	// (an append's read-back) end before the restart, and a fault that a
	// restart does not cure is not hammered.
	RestartAfter time.Duration
	Clock        clock.WithTicker
	Logger       *slog.Logger
	// Stream, on a cluster, is the log's stream: the log is writable only
	// while it has a leader.
	Stream string
}

// LogMonitor watches the embedded server and its data dir, keeps the
// LogHealth flag, and recovers by itself: once the data dir has room again
// it restarts JetStream in the running server, which reopens the stream
// from disk (a file store that met a write error refuses every later write
// until it is reopened), and reconnects the process's client so its
// consumers resume at once.
type LogMonitor struct {
	emb    *Embedded
	health *eventlog.LogHealth
	opts   LogMonitorOptions

	// restartDue is when the next restart may run; zero while no fault
	// that a restart would cure is seen.
	restartDue time.Time
	cluster    clusterWatch
}

// NewLogMonitor watches emb and sets health.
func NewLogMonitor(emb *Embedded, health *eventlog.LogHealth, opts LogMonitorOptions) *LogMonitor {
	if opts.MinFree == 0 {
		opts.MinFree = 1 << 20
	}
	if opts.Every == 0 {
		opts.Every = time.Second
	}
	if opts.RestartAfter == 0 {
		opts.RestartAfter = 5 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &LogMonitor{emb: emb, health: health, opts: opts}
}

// Run checks every opts.Every, and at once after a failed append, until
// ctx ends.
func (m *LogMonitor) Run(ctx context.Context) {
	t := m.opts.Clock.NewTicker(m.opts.Every)
	defer t.Stop()
	for {
		m.check()
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-m.health.Kicks():
		}
	}
}

// check looks at the server and the disk once, updates the flag, and
// restarts JetStream when the disk has room again but the server still
// refuses writes. Only Run calls it: checks never overlap.
func (m *LogMonitor) check() {
	now := m.opts.Clock.Now()
	v := m.evaluate()
	m.mark(v, now)
	if v.writable || !v.restart {
		m.restartDue = time.Time{}
		return
	}
	if m.restartDue.IsZero() {
		m.restartDue = now.Add(m.opts.RestartAfter)
	}
	if now.Before(m.restartDue) {
		return
	}
	m.restartDue = now.Add(m.opts.RestartAfter)
	m.restartJetStream()
	m.mark(m.evaluate(), m.opts.Clock.Now())
}

// evaluate says whether the log can be written, why not, whether the
// server itself refuses, and whether a restart of JetStream would help:
// the disk has room, but the server holds on to a fault (a file store keeps its first write error; JetStream may
// have disabled itself) or to a store limit it derived from the free space
// of a full disk when it started.
func (m *LogMonitor) evaluate() verdict {
	if v, ok := m.clusterVerdict(); ok {
		return v
	}
	dir := m.emb.cfg.Dir
	free, ferr := FreeBytes(dir)
	fault := m.serverFault()
	if ferr == nil && free < m.opts.MinFree {
		reason := fmt.Sprintf("no space left on device: data dir %s has %d bytes free (at least %d needed)", dir, free, m.opts.MinFree)
		if fault != "" {
			reason += "; " + fault
		}
		return verdict{reason: reason, serverFault: fault != ""}
	}
	freeNote := ""
	if ferr == nil {
		freeNote = fmt.Sprintf(" (data dir %s has %d bytes free)", dir, free)
	}
	if fault != "" {
		return verdict{reason: fault + freeNote, serverFault: true, restart: true}
	}
	if used, limit, ok := m.storeUsage(); ok && used+int64(m.opts.MinFree) > limit {
		// Only a limit the server derived from the free disk moves with a
		// restart, and only when the disk has room now.
		grows := m.emb.cfg.MaxStore == 0 && ferr == nil && (int64(free)+used)/4*3 > used+int64(m.opts.MinFree)
		return verdict{reason: fmt.Sprintf("no space left on device: the JetStream store limit is reached (%d of %d bytes used)%s", used, limit, freeNote), restart: grows}
	}
	return verdict{writable: true}
}

// verdict is one look of the monitor.
type verdict struct {
	writable    bool
	reason      string
	serverFault bool
	restart     bool // a restart of JetStream would help
}

// storeUsage is what the log's account holds on disk and JetStream's limit.
func (m *LogMonitor) storeUsage() (used, limit int64, ok bool) {
	cfg := m.emb.Server.JetStreamConfig()
	acc := m.emb.Server.GlobalAccount()
	if cfg == nil || acc == nil || cfg.MaxStore <= 0 {
		return 0, 0, false
	}
	return int64(acc.JetStreamUsage().Store), cfg.MaxStore, true
}

// serverFault is the embedded server's own verdict: JetStream disabled, a
// stream not recovered, or a stream's write error ("" when healthy).
func (m *LogMonitor) serverFault() string {
	hs := m.emb.Server.Healthz(m.healthzOptions())
	if hs == nil || hs.Error == "" && hs.Status == "ok" {
		return ""
	}
	if strings.Contains(hs.Error, "ready for connections") {
		// The server's first check (its listeners answer within 1 ms)
		// fails for a moment on a loaded machine: not a storage fault,
		// and nothing a restart of JetStream would mend. The next look
		// sees the store.
		return ""
	}
	if hs.Error != "" {
		return "the embedded NATS server refuses writes: " + hs.Error
	}
	return "the embedded NATS server refuses writes: " + hs.Status
}

func (m *LogMonitor) mark(v verdict, now time.Time) {
	was := m.health.Status().Writable
	writable, reason := v.writable, v.reason
	if !m.health.Set(writable, reason, v.serverFault, now) {
		return
	}
	switch {
	case writable == was:
		// The same fault in other words (the free bytes moved).
		m.opts.Logger.Debug("event log still cannot be written", "dir", m.emb.cfg.Dir, "reason", reason)
	case writable:
		m.opts.Logger.Info("event log writable again", "dir", m.emb.cfg.Dir)
	default:
		m.opts.Logger.Error("event log cannot be written; refusing writes until it recovers", "dir", m.emb.cfg.Dir, "reason", reason)
	}
}

// restartJetStream shuts JetStream down (keeping its state on disk) and
// enables it again with the configuration the server started with, as the
// server itself does when a config reload turns JetStream back on.
func (m *LogMonitor) restartJetStream() {
	ns := m.emb.Server
	m.opts.Logger.Warn("restarting JetStream to recover from a storage fault", "dir", m.emb.cfg.Dir)
	if ns.JetStreamEnabled() {
		if err := ns.ShutdownJetStream(); err != nil {
			m.opts.Logger.Error("JetStream restart: shutdown failed", "err", err)
			return
		}
	}
	if err := ns.EnableJetStream(m.emb.jetStreamConfig()); err != nil {
		m.opts.Logger.Error("JetStream restart: enable failed; will try again", "dir", m.emb.cfg.Dir, "err", err)
		return
	}
	// The consumers of this process (the views' tail, the sinks) lived in
	// the JetStream that was shut down. A reconnect makes their clients
	// re-create them at once, where a missed heartbeat would take seconds.
	if err := m.emb.Conn.ForceReconnect(); err != nil {
		m.opts.Logger.Warn("JetStream restart: reconnect failed; consumers resume after their heartbeat", "err", err)
	}
}

// jetStreamConfig is the JetStream configuration StartEmbedded gives the
// server (EnableJetStream appends the "jetstream" store subdir itself).
func (e *Embedded) jetStreamConfig() *server.JetStreamConfig {
	return &server.JetStreamConfig{
		StoreDir:   e.cfg.Dir,
		SyncAlways: !e.cfg.NoSync,
		MaxMemory:  e.cfg.MaxMemory,
		MaxStore:   e.cfg.MaxStore,
		Strict:     true,
		CompressOK: true,
	}
}

// FreeBytes is what an unprivileged writer can still put on the file
// system of dir.
func FreeBytes(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Bavail * uint64(st.Bsize), nil
}
