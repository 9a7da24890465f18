//go:build race

package dashboard_test

// raceEnabled: the race detector slows the server several times over, so
// timing budgets are reported, not enforced.
const raceEnabled = true
