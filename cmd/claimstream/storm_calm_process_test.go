package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// calmDefault is the calm run's length in a plain `go test`; set
// CLAIMSTREAM_CALM to a duration (30m) for the long run.
const calmDefault = 20 * time.Second

// TestCalmLoadOfThreeReplicas: the storm's load (provider calls and log
// reads on every replica) with nobody killed. No replica exits, every
// acknowledged IncreaseSize has its claim, and when the load ends the
// stream holds fewer than half the consumers its limit allows: no read
// leaves its consumer behind.
//
//	go test ./cmd/claimstream -run TestCalmLoadOfThreeReplicas -v
//	CLAIMSTREAM_CALM=30m go test ./cmd/claimstream -run TestCalmLoadOfThreeReplicas -v -timeout 45m
func TestCalmLoadOfThreeReplicas(t *testing.T) {
	length := envDuration(t, "CLAIMSTREAM_CALM", calmDefault)
	seed := uint64(time.Now().UnixNano())
	t.Logf("calm load for %s, seed %d", length, seed)
	replicas := newThreeReplicas(t, "--speed", "20", "--config", stormPool(t, stormSlots))
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
		}
	}
	tick.Stop()
	wg.Wait()

	sameLog(t, replicas)
	rep.check(t, checkLog(t, replicas[0]))
	for _, r := range replicas {
		n, l, err := logConsumers(metrics[r])
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if l == 0 || n >= l/2 {
			t.Errorf("%s: the log's stream holds %d consumers at the end of the load, limit %d: want fewer than half", r.name, n, l)
		}
		t.Logf("%s: %d consumers at the end, limit %d", r.name, n, l)
	}
	t.Logf("calm: at most %d consumers while loaded (limit %d); %s", most, limit, rep.summary(checkLog(t, replicas[0]), length))
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
