package rest_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/provider/rest"
)

// The audit and replay benchmarks run over the log of the projections
// benchmarks (10,000 slots in 100 groups, claim after claim, every claim
// collected; CLAIMSTREAM_BENCH_EVENTS events, default 1,000,000), which
// `go test ./projections -run '^$' -bench Rebuild -benchtime 1x` generates
// once under the temp dir:
//
//	go test ./provider/rest -run '^$' -bench . -benchtime 20x
func benchAPI(b *testing.B) (http.Handler, *eventlog.Store, int) {
	b.Helper()
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("CLAIMSTREAM_BENCH_EVENTS")); err == nil && v > 0 {
		n = v
	}
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("claimstream-bench-v1-%d", n))
	if _, err := os.Stat(filepath.Join(dir, "complete")); err != nil {
		b.Skipf("no bench log in %s: run go test ./projections -run '^$' -bench Rebuild -benchtime 1x first", dir)
	}
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	st, err := eventlog.OpenStore(context.Background(), js, eventlog.StoreConfig{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	views := projections.NewRunner(st, projections.RunnerOptions{Logger: quiet})
	if err := views.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	svc := handlers.NewService(st, views, clk, "/bench", quiet)
	return rest.New(views, svc, st, clk, rest.Options{Token: "t"}), st, n
}

func get(b *testing.B, h http.Handler, path string) int {
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer t")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
	}
	return rec.Body.Len()
}

// BenchmarkAudit: the story of one slot (about 1/10,000 of the log) and of
// one collected claim, against the baseline of scanning the whole log for
// the slot's events.
func BenchmarkAudit(b *testing.B) {
	h, st, n := benchAPI(b)
	const slot = "node-4242.lan"
	// The generator names the claim of loop i on slot i%10000 <slot>-<i hex>.
	claim := fmt.Sprintf("%s-%06x", slot, 4242+10_000*3)
	b.Run("baseline=full-log-scan", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var got int
			err := st.Read(context.Background(), 1, 0, func(e events.Event) error {
				if e.Aggregate.Name == slot {
					got++
				}
				return nil
			})
			if err != nil || got == 0 {
				b.Fatal(err, got)
			}
		}
		b.ReportMetric(float64(n), "log-events")
	})
	b.Run("audit-slot", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			get(b, h, "/api/v1/audit/slots/"+slot)
		}
	})
	b.Run("audit-claim-collected", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			get(b, h, "/api/v1/audit/claims/"+claim)
		}
	})
	b.Run("audit-claim-with-slot", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			get(b, h, "/api/v1/audit/claims/"+claim+"?slot="+slot)
		}
	})
}

// BenchmarkReplay: the views rebuilt at the middle of the log, by time and
// by sequence.
func BenchmarkReplay(b *testing.B) {
	h, st, n := benchAPI(b)
	mid, err := st.Get(context.Background(), uint64(n/2))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("at-middle", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			get(b, h, "/api/v1/replay?at="+mid.Time.Format(time.RFC3339))
		}
	})
	b.Run("seq-end", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			get(b, h, "/api/v1/replay?seq="+strconv.Itoa(n))
		}
	})
}
