package serve

import (
	"context"
	"time"

	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/telemetry"
	"github.com/claimstream/claimstream/projections"
)

// A pool file that does not load, or that the log refuses, stops serve
// only while the log holds no pool: there is nothing else to serve, and
// the error says what to fix. Once the log holds a pool, a bad file at
// start (a rolled pod after a bad `helm upgrade`) must not take the
// provider down: serve keeps serving the log's pool, reports the file
// (the log line, claimstream_pool_file_applied 0, /readyz, the status
// ConfigMap and a Kubernetes Event, all read from plane.poolFile), and
// applies the next valid file watchPool reads. /readyz stays ready: a
// single replica turned NotReady would drop out of its Services, the
// very outage this avoids.

// logHoldsPool reports whether the views hold a group the log declared.
func (p *plane) logHoldsPool() bool {
	held := false
	p.views.Read(func(st *projections.State) {
		for _, g := range st.Groups {
			if !g.Retired {
				held = true
				return
			}
		}
	})
	return held
}

// poolFileNotApplied reports a file that did not load; applyPool reports
// the outcome of an apply.
func (p *plane) poolFileNotApplied(file string, err error) {
	p.poolApplied(telemetry.PoolFileInvalid, err)
	p.poolFile.Set(file, pool.ReasonInvalid, err, p.clock.Now())
	p.log.Error("pool file not applied; serving the pool the log holds until a valid file is written", "file", file, "reason", pool.ReasonInvalid, "err", err)
}

// followPoolFile keeps a follower's report of the pool file current. Only
// the leader applies the file (watchPool), but a replica that found it
// invalid at start reports that, and would go on reporting it after the
// file is fixed: so while it does not lead and its report says refused, it
// reads the file again when it changes. A file that loads clears the
// report (the leader applies it, and reports what the log makes of it).
func (p *plane) followPoolFile(ctx context.Context, path string, every time.Duration) {
	if every <= 0 {
		return
	}
	// Read again at the first tick: the file may have changed between the
	// read that refused it and now.
	var last fileStamp
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if p.leads() || !p.poolFile.Refused() {
			continue
		}
		m := stampOf(path)
		if m.equal(last) {
			continue
		}
		last = m
		if _, err := p.loadPoolFile(path); err != nil {
			p.poolFileNotApplied(path, err)
			continue
		}
		p.poolApplied("", nil)
		p.poolFile.Clear()
		p.log.Info("pool file loads again; the leader applies it", "file", path)
	}
}
