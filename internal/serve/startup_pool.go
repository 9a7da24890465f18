package serve

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/claimstream/claimstream/handlers/pool"
)

// poolLoad is the pool file being parsed and checked while the embedded
// server starts and recovers; neither needs the other. The views are built
// only once the parse has ended (parsed): at a large pool the parse and
// the snapshot's load are the two largest heaps of a start, and side by
// side they set its peak. serve waits for the file before it starts the
// listeners or applies anything, so while the log holds no pool an
// invalid file stops the start before any event is written or any request
// answered; with a pool in the log, serve serves that and reports the
// file (serve_poolfile.go).
type poolLoad struct {
	done chan struct{}
	cfg  *pool.Config
	err  error
	took time.Duration
}

func loadPoolAsync(path string, load func(string) (*pool.Config, error)) *poolLoad {
	l := &poolLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		began := time.Now()
		l.cfg, l.err = load(path)
		l.took = time.Since(began)
	}()
	return l
}

// parsed waits until the parse has ended, whatever its outcome.
func (l *poolLoad) parsed(ctx context.Context) error {
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("loading the pool file: %w", ctx.Err())
	}
}

// wait returns the loaded file, or why it did not load, and keeps no
// reference to it.
func (l *poolLoad) wait(ctx context.Context) (*pool.Config, error) {
	if err := l.parsed(ctx); err != nil {
		return nil, err
	}
	cfg := l.cfg
	l.cfg = nil
	return cfg, l.err
}

// pendingPool hands the pool file parsed at start to the first term that
// applies it, and then holds nothing: the parsed file grows with the pool
// and serving never reads it again (a later term or a change reads the
// file anew).
type pendingPool struct{ cfg atomic.Pointer[pool.Config] }

func newPendingPool(cfg *pool.Config) *pendingPool {
	p := &pendingPool{}
	p.cfg.Store(cfg)
	return p
}

// take returns the parsed file once; later calls return nil.
func (p *pendingPool) take() *pool.Config { return p.cfg.Swap(nil) }
