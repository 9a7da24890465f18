package serve

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// retentionOptions are the flags of the log's retention and the
// checkpoints that cover what expires.
type retentionOptions struct {
	retention          retention
	checkpointEvery    uint64
	checkpointInterval time.Duration
}

func (o *retentionOptions) addFlags(f *pflag.FlagSet) {
	o.retention = retention(400 * 24 * time.Hour)
	f.Var(&o.retention, "retention", "how long events stay in the log (days such as 400d, or a duration such as 36h; 0: forever); checkpoints cover what expires")
	f.Uint64Var(&o.checkpointEvery, "checkpoint-every", 10_000, "take a checkpoint of the views after this many events (0: the default)")
	f.DurationVar(&o.checkpointInterval, "checkpoint-interval", time.Hour, "take a checkpoint this long after the last one when events came since")
}

// apply sets the runner's checkpoints: the bucket, kept with as many
// replicas as the stream, and the schedule.
func (o *retentionOptions) apply(ctx context.Context, js jetstream.JetStream, store *eventlog.Store, ropts *projections.RunnerOptions, clk clock.Clock) error {
	if o.checkpointInterval < 0 {
		return fmt.Errorf("--checkpoint-interval %s: want a positive duration such as 1h", o.checkpointInterval)
	}
	cps, err := projections.OpenCheckpoints(ctx, js, "", store.Replicas())
	if err != nil {
		return err
	}
	ropts.Checkpoints = cps
	ropts.Clock = clk
	ropts.CheckpointPolicy = projections.CheckpointPolicy{Every: o.checkpointEvery, Interval: o.checkpointInterval, Retention: time.Duration(o.retention)}
	return nil
}

// retention is a MaxAge given in days ("400d") or as a Go duration; 0 keeps
// events forever.
type retention time.Duration

// minRetention keeps a typo ("400s") from expiring the log within minutes
// of start: a checkpoint must be taken before the oldest events expire.
const minRetention = time.Hour

func parseRetention(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 32)
		if err != nil || n > 100*365 {
			return 0, fmt.Errorf("retention %q: want a number of days such as 400d (at most 36500d), a duration such as 36h, or 0 for forever", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		d, err = time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("retention %q: want a number of days such as 400d, a duration such as 36h, or 0 for forever", s)
		}
	}
	if d == 0 {
		return 0, nil
	}
	if d < minRetention {
		return 0, fmt.Errorf("retention %q is shorter than %s: events would expire before a checkpoint covers them", s, minRetention)
	}
	return d, nil
}

func (r *retention) Set(s string) error {
	d, err := parseRetention(s)
	if err != nil {
		return err
	}
	*r = retention(d)
	return nil
}

func (r *retention) String() string {
	d := time.Duration(*r)
	if d == 0 {
		return "0"
	}
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func (r *retention) Type() string { return "days" }
