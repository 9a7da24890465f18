package main

import (
	"context"
	"fmt"
	"time"

	"github.com/claimstream/claimstream/handlers/pool"
)

// poolLoad is the pool file being parsed and checked while the plane
// starts: at 10,000 slots the parse takes about as long as the embedded
// server and the views together (docs/benchmarks.md), and neither needs
// the other. serve waits for it before it starts the listeners or applies
// anything, so an invalid file still stops the start before any event is
// written or any request answered.
type poolLoad struct {
	done chan struct{}
	cfg  *pool.Config
	err  error
	took time.Duration
}

func loadPoolAsync(path string) *poolLoad {
	l := &poolLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		began := time.Now()
		l.cfg, l.err = loadPool(path)
		l.took = time.Since(began)
	}()
	return l
}

// wait returns the loaded file, or why it did not load.
func (l *poolLoad) wait(ctx context.Context) (*pool.Config, error) {
	select {
	case <-l.done:
		return l.cfg, l.err
	case <-ctx.Done():
		return nil, fmt.Errorf("loading the pool file: %w", ctx.Err())
	}
}
