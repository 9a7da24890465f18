package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/pool"
)

// The ConfigMap says what became of the pool file, and is rewritten when
// that changes though the views do not (a refused file writes nothing to
// the log, and neither does a later one that matches it).
func TestStatusConfigMapSaysWhatBecameOfThePoolFile(t *testing.T) {
	e := &statusEnv{h: handlerstest.New(t), f: kube.NewFake()}
	e.h.Declare("g", events.GroupSpec{}, "a")
	var report pool.FileReport
	report.Set("pool.yaml", pool.ReasonInvalid, errors.New("pool.yaml:3: groups[0].maxSize: must be >= 0 (got -1)"), e.h.Clock.Now())
	ctx, cancel := context.WithCancel(context.Background())
	w := kube.NewStatusWriter(kube.StatusWriterConfig{Client: e.f, Namespace: "ns", Views: e.h.Views, Clock: e.h.Clock, Interval: time.Second, Leader: "claimstream-0", Log: quietLog, PoolFile: &report})
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("status writer: %v", err)
		}
	}()
	st := e.waitStatus(t, "naming the file not applied", func(st kube.Status) bool { return st.PoolFile != nil })
	if p := st.PoolFile; p.Applied || p.File != "pool.yaml" || p.Reason != pool.ReasonInvalid || p.Error != "pool.yaml:3: groups[0].maxSize: must be >= 0 (got -1)" {
		t.Errorf("poolFile %+v", p)
	}
	seq := st.Seq
	waitForWaiter(t, e.h)
	e.h.Clock.Step(time.Second) // past the interval, short of the resync
	report.Set("pool.yaml", "", nil, e.h.Clock.Now())
	st = e.waitStatus(t, "saying the file is applied", func(st kube.Status) bool { return st.PoolFile != nil && st.PoolFile.Applied })
	if st.PoolFile.Reason != "" || st.PoolFile.Error != "" || st.Seq != seq {
		t.Errorf("status %+v, poolFile %+v", st, st.PoolFile)
	}
}
