package serve

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// What `go tool task run` runs (serve on the example pool, playing the
// example scenario in real time on the simulator's lagging fake cluster,
// the work queue driving the reactors), three times faster than the
// scenario says: every lifecycle Job is POSTed to the fake cluster once,
// and its log says so once, with no line of a Job created again
// (recorded, absent from the cluster) or found by a second POST.
func TestTaskRunPostsEachLifecycleJobOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("plays the example scenario in real time")
	}
	var (
		mu    sync.Mutex
		posts = map[string]int{}
	)
	logs := &logcapture.Buffer{}
	o := serveOptions{
		config: examplePool, configPoll: time.Hour,
		dataDir: t.TempDir(), stream: "CLAIMSTREAM", noFsync: true,
		logLevel: "info", logFormat: "json", logOut: logs,
		plaintext:   true,
		grpcAddress: freeAddr(t), apiAddress: freeAddr(t), metricsAddress: freeAddr(t),
		cluster: clusterOptions{
			scenario: filepath.Join("..", "..", "deploy", "examples", "scenario.yaml"), speed: 60,
			onWorld: func(w *sim.World) {
				w.Fake.PrependReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
					if j, ok := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job); ok {
						mu.Lock()
						posts[j.Name]++
						mu.Unlock()
					}
					return false, nil, nil
				})
			},
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, o) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})
	// The story played to its end. Its take-back at 9m races the boot
	// reactor in real time: either node-1.lan's new claim was cancelled and
	// the hand start at 11m is shut down by the input law (its Job created),
	// or the boot won, the decrease was refused and the hand start found
	// node-1.lan on.
	eventstest.CheckFor(t, 60*time.Second, 100*time.Millisecond, func() error {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("serve returned: %v", err)
		default:
		}
		l := logs.String()
		switch {
		case strings.Contains(l, `"why":"input law"`):
			return nil
		case strings.Contains(l, `"msg":"scenario played"`) && strings.Contains(l, `"msg":"scenario step refused","step":"decide.DecreaseTargetSize"`):
			return nil
		}
		return errNotYet
	})
	stop()

	created := map[string]int{}
	for _, l := range strings.Split(logs.String(), "\n") {
		var x struct{ Msg, Job string }
		if json.Unmarshal([]byte(l), &x) != nil {
			continue
		}
		switch {
		case x.Msg == "startup Job created" || x.Msg == "shutdown Job created":
			created[x.Job]++
		case strings.Contains(x.Msg, "(recorded, absent from the cluster)"):
			t.Errorf("Job %s created again: %q", x.Job, x.Msg)
		case strings.Contains(x.Msg, "Job found (AlreadyExists)"):
			t.Errorf("Job %s POSTed again and found: %q", x.Job, x.Msg)
		}
	}
	mu.Lock()
	posted := maps.Clone(posts)
	mu.Unlock()
	for job, n := range posted {
		if n != 1 || created[job] != 1 {
			t.Errorf("Job %s: POSTed %d times, logged created %d times; want 1 and 1", job, n, created[job])
		}
	}
	for job := range created {
		if posted[job] == 0 {
			t.Errorf("Job %s logged created, never POSTed", job)
		}
	}
	// Six boots (node-1.lan, node-2.lan twice, node-3.lan, burst-1,
	// burst-2) and five shutdowns (node-2.lan after its failed wake,
	// node-1.lan scaled down, burst-1, burst-2, node-1.lan by the input law);
	// or, the take-back refused, a seventh boot (node-1.lan at 9m) in place
	// of the input law's shutdown.
	if len(posted) < 11 {
		t.Errorf("%d lifecycle Jobs POSTed, want the story's 11: %v", len(posted), posted)
	}
}
