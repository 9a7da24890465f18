package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/handlers/pool"
)

// A pool file refused before the recorder starts (at serve's start) is
// recorded on serve's Pod when it starts, as a Warning; the file applied
// after it is recorded as a Normal Event.
func TestEventRecorderRecordsThePoolFileOnServesPod(t *testing.T) {
	e := newRecorderEnv(t)
	var report pool.FileReport
	report.Set("pool.yaml", pool.ReasonRefused, errors.New("group rack has 2 live claims, more than the new maxSize 1"), e.h.Clock.Now())
	ctx, cancel := context.WithCancel(context.Background())
	r := kube.NewEventRecorder(kube.EventRecorderConfig{Client: e.f, Cluster: e.cl, Views: e.h.Views, Log: quietLog,
		PoolFile: &report, Pod: types.NamespacedName{Namespace: "claimstream", Name: "claimstream-0"}})
	stop, err := r.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); stop() }()

	refused := e.waitEvent(t, kube.ReasonPoolFileRefused, "Pod", "claimstream-0")
	if refused.Type != "Warning" || refused.Namespace != "claimstream" || !strings.Contains(refused.Note, "pool.yaml not applied (refused)") || !strings.Contains(refused.Note, "more than the new maxSize 1") {
		t.Errorf("PoolFileRefused: %+v", refused)
	}
	report.Set("pool.yaml", "", nil, e.h.Clock.Now())
	if applied := e.waitEvent(t, kube.ReasonPoolFileApplied, "Pod", "claimstream-0"); applied.Type != "Normal" {
		t.Errorf("PoolFileApplied: %+v", applied)
	}
}
