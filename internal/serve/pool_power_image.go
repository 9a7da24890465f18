package serve

import (
	"fmt"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers/pool"
)

// poolLoader loads the pool file and checks it against what serve was
// started with: a slot that uses a power driver needs the image its
// lifecycle Jobs run (--power-image), or every claim on it would fail
// only at its deadline. The simulator runs power Jobs without one.
func poolLoader(c clusterOptions) func(path string) (*pool.Config, error) {
	return func(path string) (*pool.Config, error) {
		cfg, err := pool.Load(path)
		if err != nil {
			return nil, err
		}
		if c.powerImage == "" && !c.simulated() {
			if err := needsPowerImage(cfg); err != nil {
				return nil, err
			}
		}
		return cfg, nil
	}
}

// needsPowerImage names the slots of cfg whose Jobs run a power driver.
func needsPowerImage(cfg *pool.Config) error {
	var first, driver string
	n := 0
	for _, s := range cfg.Slots {
		for _, j := range []*events.JobSpec{s.Spec.Startup, s.Spec.Shutdown} {
			if j != nil && j.Power != nil {
				if n == 0 {
					first, driver = s.Name, j.Power.Driver
				}
				n++
				break
			}
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d slot(s) switch their machines with a power driver (the first, %s, with %s) and serve has no --power-image, the claimstream image their lifecycle Jobs run (the chart sets it): start serve with --power-image", cfg.Source, n, first, driver)
}
