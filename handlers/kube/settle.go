package kube

import "sync"

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
func (c *Cluster) unchangedSinceSettled() (settleMark, bool) {
	if c.generation == nil {
		return settleMark{}, false
	}
	c.workMu.Lock()
	work := c.work
	c.workMu.Unlock()
	m := settleMark{ok: true, gen: c.generation(), work: work}
	c.settled.mu.Lock()
	defer c.settled.mu.Unlock()
	return m, c.settled.last == m
}

func (c *Cluster) markSettled(m settleMark) {
	if !m.ok {
		return
	}
	c.settled.mu.Lock()
	c.settled.last = m
	c.settled.mu.Unlock()
}
