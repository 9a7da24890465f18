package serve

import (
	"github.com/claimstream/claimstream/handlers/sinks"
	"github.com/claimstream/claimstream/provider/rest"
)

// deadLetters is what the REST API serves of the sinks' dead letters: a
// Dispatcher over the sinks file serve runs with (it lists and redelivers;
// the delivering one runs under the leader). nil with no sinks.
func (p *plane) deadLetters() rest.DeadLetters {
	if len(p.sinks.Sinks) == 0 {
		return nil
	}
	d := &sinks.Dispatcher{JS: p.store.JetStream(), Store: p.store, Config: p.sinks, Clock: p.clock, Logger: p.log}
	if p.tel != nil {
		d.Metrics = p.tel.Metrics
	}
	return d
}
