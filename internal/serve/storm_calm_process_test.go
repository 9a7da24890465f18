package serve

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
)

// calmDefault is the calm run's length in a plain `go test`; set
// CLAIMSTREAM_CALM to a duration (30m) for the long run.
const calmDefault = 20 * time.Second

// TestProcessCalmLoadOfThreeReplicas: the storm's load (provider calls and log
// reads on every replica, a webhook sink) with nobody killed. No replica
// exits, every acknowledged IncreaseSize has its claim, at every scrape the
// log's stream holds no more consumers than the replicas may have at once
// (each one views' reader and its reads in flight, plus the sinks'
// durables), and once the load ends exactly the views' readers and the
// sinks' durables are left: no read leaves its consumer behind.
//
//	go test ./internal/serve -run TestProcessCalmLoadOfThreeReplicas -v
//	CLAIMSTREAM_CALM=30m go test ./internal/serve -run TestProcessCalmLoadOfThreeReplicas -v -timeout 45m
func TestProcessCalmLoadOfThreeReplicas(t *testing.T) {
	length := envDuration(t, "CLAIMSTREAM_CALM", calmDefault)
	seed := uint64(time.Now().UnixNano())
	t.Logf("calm load for %s, seed %d", length, seed)
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	sinksFile := filepath.Join(t.TempDir(), "sinks.yaml")
	writeFile(t, sinksFile, "sinks:\n  - {name: calm, url: "+hook.URL+", types: [ClaimCreated]}\n")
	const sinkDurables = 1
	replicas := newThreeReplicas(t, "--speed", "20", "--config", stormPool(t, stormSlots), "--sinks", sinksFile)
	// What the stream may hold at any moment, and what must remain when
	// no read is in flight.
	atMost := len(replicas)*(1+eventlog.DefaultMaxReaders) + sinkDurables
	atRest := len(replicas) + sinkDurables
	metrics := map[*replicaProc]string{}
	for _, r := range replicas {
		metrics[r] = freeAddr(t)
		r.args = append(r.args, "--metrics-address", metrics[r])
		r.start()
	}
	sameLog(t, replicas)

	var rep stormReport
	ctx, cancel := context.WithTimeout(context.Background(), length)
	defer cancel()
	var wg sync.WaitGroup
	stormLoad(ctx, &wg, replicas, seed, &rep)
	most, limit := 0, 0
	tick := time.NewTicker(5 * time.Second)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
		for _, r := range replicas {
			if !r.running() {
				t.Fatalf("%s exited under calm load:\n%s", r.name, lastLines(r.logText(), 40))
			}
			n, l, err := logConsumers(metrics[r])
			if err != nil {
				continue // a scrape that times out under load is no finding
			}
			most, limit = max(most, n), l
			if n > atMost {
				t.Errorf("%s: the log's stream holds %d consumers under load, more than the %d the replicas may have at once (a views' reader and %d reads each, %d sink durables)",
					r.name, n, atMost, eventlog.DefaultMaxReaders, sinkDurables)
			}
		}
	}
	tick.Stop()
	wg.Wait()

	sameLog(t, replicas)
	rep.check(t, checkLog(t, replicas[0]))
	// The reads the load started end within their answers' deadlines;
	// their consumers go with them.
	for _, r := range replicas {
		eventstest.CheckFor(t, 30*time.Second, 200*time.Millisecond, func() error {
			n, l, err := logConsumers(metrics[r])
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if n != atRest {
				return fmt.Errorf("%s: the log's stream holds %d consumers after the load (limit %d), want %d: a views' reader per replica and %d sink durables", r.name, n, l, atRest, sinkDurables)
			}
			return nil
		})
	}
	t.Logf("calm: at most %d consumers while loaded (bound %d, limit %d), %d after; %s", most, atMost, limit, atRest, rep.summary(checkLog(t, replicas[0]), length))
}

// logConsumers scrapes a replica's claimstream_log_consumers and
// claimstream_log_consumer_limit for the log's stream.
func logConsumers(addr string) (n, limit int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	found := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for name, dst := range map[string]*int{"claimstream_log_consumers": &n, "claimstream_log_consumer_limit": &limit} {
			if !strings.HasPrefix(line, name+`{stream="CLAIMSTREAM"}`) {
				continue
			}
			f := strings.Fields(line)
			v, perr := strconv.ParseFloat(f[len(f)-1], 64)
			if perr != nil {
				return 0, 0, fmt.Errorf("%s: %q: %w", addr, line, perr)
			}
			*dst = int(v)
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("%s/metrics has no claimstream_log_consumers and claimstream_log_consumer_limit for CLAIMSTREAM", addr)
	}
	return n, limit, nil
}
