package leader

import (
	"context"
	"log/slog"
	"sync"
)

// Always is the Elector of a single replica that runs without an election
// (serve --leader-elect=false): it leads from the start until ctx ends.
type Always struct {
	Self Holder
	Log  *slog.Logger

	leading chan struct{}
	once    sync.Once
}

// NewAlways returns the elector of a replica that always leads.
func NewAlways(self Holder, log *slog.Logger) *Always {
	if log == nil {
		log = slog.Default()
	}
	return &Always{Self: self, Log: log, leading: make(chan struct{})}
}

// Identity is the replica's name.
func (a *Always) Identity() string { return a.Self.Replica }

// Leading is true once Run has started.
func (a *Always) Leading() bool {
	select {
	case <-a.leading:
		return true
	default:
		return false
	}
}

// Leader is this replica.
func (a *Always) Leader() Holder { return a.Self }

// Run leads until ctx ends.
func (a *Always) Run(ctx context.Context, lead func(context.Context)) {
	a.once.Do(func() { close(a.leading) })
	a.Log.Info("leading", "replica", a.Self.Replica, "election", "off")
	lead(ctx)
	<-ctx.Done()
}
