package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/projections"
)

// serve on a data dir whose last event a truncated block file lost: writes
// are refused with the missing sequence named, unless --accept-log-gaps.
func TestServeOnATruncatedLogRefusesWritesUnlessGapsAreAccepted(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions{config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM", noFsync: true, logLevel: "warn"}
	log, _ := newLogger("warn", "text")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := startPlane(ctx, o, log, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.views.Run(runCtx) }()
	cfg, err := loadPool(o.config)
	if err != nil {
		t.Fatal(err)
	}
	leadNow(t, ctx, p)
	if err := p.applyPool(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	last := p.views.Seq()
	stop()
	<-done
	p.emb.Shutdown()
	blk := filepath.Join(dir, "jetstream", "$G", "streams", "CLAIMSTREAM", "msgs", "1.blk")
	fi, err := os.Stat(blk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(blk, fi.Size()-100); err != nil {
		t.Fatal(err)
	}

	increase := func(p *plane) error {
		var group string
		p.views.Read(func(s *projections.State) {
			for name := range s.Groups {
				group = name
			}
		})
		_, err := p.service.Execute(ctx, decide.IncreaseSize{Group: group, Delta: 1, RequestedBy: "test"})
		return err
	}
	for _, accept := range []bool{false, true} {
		o.acceptGaps = accept
		p, err := startPlane(ctx, o, log, nil, nil)
		if err != nil {
			t.Fatalf("start on a truncated log (accept %v): %v", accept, err)
		}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.views.Run(runCtx) }()
		leadNow(t, runCtx, p)
		err = increase(p)
		switch {
		case !accept && (decide.CodeOf(err) != decide.CodeFailedPrecondition || !strings.Contains(err.Error(), "missing from the log")):
			t.Errorf("writes over a gap: %v, want a refusal naming the missing sequence", err)
		case accept && err != nil:
			t.Errorf("--accept-log-gaps, yet: %v", err)
		}
		if gaps := p.views.Gaps(); len(gaps) != 1 || gaps[0].Last != last {
			t.Errorf("gaps %v, want the last event %d", gaps, last)
		}
		stop()
		<-done
		p.emb.Shutdown()
	}
}
