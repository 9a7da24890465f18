package serve

import "github.com/claimstream/claimstream/handlers/sinks"

// sinkNames are the webhook sinks of the sinks file: their counters are on
// the scrape at zero from the start.
func sinkNames(cfg sinks.Config) []string {
	out := make([]string, 0, len(cfg.Sinks))
	for _, s := range cfg.Sinks {
		out = append(out, s.Name)
	}
	return out
}
