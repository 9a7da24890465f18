// Package whatif replays a recorded period of demand under other pool
// configs (docs/whatif.md): the demand facts of the log (ScaleRequested,
// DemandObserved) are asked again of a simulated pool (handlers/sim: the
// production reactors over a fake cluster, on a fake clock) whose machines
// boot, fail and shut down like the recorded ones, once under the config
// recorded at the period's start and once per candidate; each run's log is
// measured like the recorded one (projections/cost for machine-hours, kWh
// and money). The recorded log is only read; every run writes to its own
// embedded server in a temporary directory, removed after.
package whatif
