package kube

import (
	"context"
	"strings"
	"sync"
	"time"
)

// settler is the fake's side of Settle: the fake's truth (what was written
// through it), the versions the informers' handlers were called with, and
// the mark of the last Settle that found everything caught up. Only a
// cluster over a Fake has one (Fake.NewCluster); its handlers note what
// they saw through it, after they told the watchers.
type settler struct {
	versions     func() (nodes, jobs map[string]string)
	workVersions func() map[string]map[string]string
	generation   func() uint64
	changes      func(since uint64) ([]Change, bool)
	lag          func() time.Duration
	settled      settledAt
	handled      handledVersions
}

// NewCluster is New over the fake, with Settle waiting for the caches to
// reach what was written through the fake: its versions of the Nodes and
// of the namespace's Jobs, of the workload objects once the built-in
// scaler's informers run, the writes since the last Settle (ChangesSince),
// and the writes still on their way in real time (RealLag).
func (f *Fake) NewCluster(opts Options) *Cluster {
	c := New(f, opts)
	c.settle = &settler{
		versions:     f.Versions(c.namespace),
		workVersions: f.WorkVersions,
		generation:   f.Generation,
		changes:      f.ChangesSince,
		lag:          f.RealLag,
	}
	return c
}

// note records what a handler of cache saw; a nil s (no fake) records
// nothing.
func (s *settler) note(cache string, o any, deleted bool) {
	if s != nil {
		s.handled.note(cache, o, deleted)
	}
}

// wait is Settle.
func (s *settler) wait(ctx context.Context, c *Cluster) error {
	if err := s.waitLag(ctx); err != nil {
		return err
	}
	at, unchanged := s.unchangedSinceSettled(c)
	if unchanged {
		return nil
	}
	if ok, err := s.settleChanges(ctx, c, at); ok {
		if err == nil {
			s.markSettled(at)
		}
		return err
	}
	for {
		noted := s.handled.next()
		nodes, jobs := s.versions()
		if s.handled.same("nodes", nodes, "") && s.handled.same("jobs", jobs, c.namespace+"/") && s.settledWork(c) {
			s.markSettled(at)
			return nil
		}
		if err := waitHandled(ctx, noted); err != nil {
			return err
		}
	}
}

// settledWork reports whether the workload caches, if started, reached
// the fake's workload versions.
func (s *settler) settledWork(c *Cluster) bool {
	c.workMu.Lock()
	w := c.work
	c.workMu.Unlock()
	if w == nil {
		return true
	}
	want := s.workVersions()
	for res := range w.stores {
		if !s.handled.same("work/"+res, want[res], "") {
			return false
		}
	}
	return true
}

// settledAt is the mark at which Settle last found the caches caught up:
// a replayed week calls Settle millions of times, mostly with nothing
// written since the last call, and a full check walks every Node and Job.
type settledAt struct {
	mu   sync.Mutex
	last settleMark
}

// settleMark is a write generation and the workload informers running
// then (a workload informer started later has its own cache to fill).
type settleMark struct {
	ok   bool
	gen  uint64
	work *workInformers
}

// unchangedSinceSettled reports whether nothing was written and no
// workload informer started since the caches were last found caught up.
// The mark is read before the versions, so a check that passes proves the
// caches hold at least the writes up to its generation.
func (s *settler) unchangedSinceSettled(c *Cluster) (settleMark, bool) {
	c.workMu.Lock()
	work := c.work
	c.workMu.Unlock()
	m := settleMark{ok: true, gen: s.generation(), work: work}
	s.settled.mu.Lock()
	defer s.settled.mu.Unlock()
	return m, s.settled.last == m
}

func (s *settler) markSettled(m settleMark) {
	if !m.ok {
		return
	}
	s.settled.mu.Lock()
	s.settled.last = m
	s.settled.mu.Unlock()
}

// handledVersions are the resource versions the informers' handlers were
// called with, by cache ("nodes", "jobs", or a workload resource) and
// key: a handler runs after its cache took the change, so a Settle that
// finds them caught up knows the caches are, and that the watchers of
// WatchObjects and Changed were told (a stepped driver's next step then
// sees every change the last one made, whatever the goroutines' order).
type handledVersions struct {
	mu sync.Mutex
	by map[string]map[string]string
	// noted is closed at the next note, so a Settle waits for the
	// handlers instead of spinning (spinning would take CPU from the runs
	// of a what-if that go side by side).
	noted chan struct{}
}

// next returns a channel closed at the next note.
func (h *handledVersions) next() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.noted == nil {
		h.noted = make(chan struct{})
	}
	return h.noted
}

// note records o's version.
func (h *handledVersions) note(cache string, o any, deleted bool) {
	_, m, key, ok := objectKey(o)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.noted != nil {
		close(h.noted)
		h.noted = nil
	}
	if h.by == nil {
		h.by = map[string]map[string]string{}
	}
	if h.by[cache] == nil {
		h.by[cache] = map[string]string{}
	}
	if deleted {
		delete(h.by[cache], key)
		return
	}
	h.by[cache][key] = m.GetResourceVersion()
}

// same reports whether the handlers of cache were called with exactly the
// versions want holds (keys prefixed with prefix in the cache).
func (h *handledVersions) same(cache string, want map[string]string, prefix string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	got := h.by[cache]
	if len(got) != len(want) {
		return false
	}
	for name, rv := range want {
		if got[prefix+name] != rv {
			return false
		}
	}
	return true
}

// settleChanges waits until the handlers saw the changes written since
// the last Settle found everything caught up (at most mark.gen behind):
// a Settle after a write costs what was written, not every Node and Job
// the cluster holds (a replayed week leaves tens of thousands of finished
// Jobs). ok is false when it cannot tell (no change log, no earlier mark,
// a workload informer started since, or the log no longer reaches back):
// the caller compares everything.
func (s *settler) settleChanges(ctx context.Context, c *Cluster, at settleMark) (ok bool, err error) {
	s.settled.mu.Lock()
	last := s.settled.last
	s.settled.mu.Unlock()
	if !last.ok || last.work != at.work {
		return false, nil
	}
	changes, ok := s.changes(last.gen)
	if !ok {
		return false, nil
	}
	// The newest version of each object counts.
	type object struct{ cache, key string }
	want := make(map[object]string, len(changes))
	for _, ch := range changes {
		switch {
		case ch.Cache == "nodes":
			want[object{"nodes", ch.Key}] = ch.Version
		case ch.Cache == "jobs" && strings.HasPrefix(ch.Key, c.namespace+"/"):
			want[object{"jobs", ch.Key}] = ch.Version
		}
		if at.work != nil && ch.Cache != "nodes" {
			want[object{"work/" + ch.Cache, ch.Key}] = ch.Version
		}
	}
	for {
		noted := s.handled.next()
		caught := true
		s.handled.mu.Lock()
		for o, rv := range want {
			if got, seen := s.handled.by[o.cache][o.key]; got != rv || seen != (rv != "") {
				caught = false
				break
			}
		}
		s.handled.mu.Unlock()
		if caught {
			return true, nil
		}
		if err := waitHandled(ctx, noted); err != nil {
			return true, err
		}
	}
}

// waitHandled waits for the informers' handlers to note a change (noted,
// taken before the check that failed) or ctx to end. A change the
// handlers never note (the cache of an object nothing wrote through the
// fake) is looked at again after a short while.
func waitHandled(ctx context.Context, noted <-chan struct{}) error {
	t := time.NewTimer(settleRecheck)
	defer t.Stop()
	select {
	case <-noted:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// settleRecheck bounds a Settle's wait between two checks.
const settleRecheck = 10 * time.Millisecond

// waitLag waits until no write is on its way to the informers in real
// time (Fake.RealLag).
func (s *settler) waitLag(ctx context.Context) error {
	for d := s.lag(); d > 0; d = s.lag() {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	return nil
}
