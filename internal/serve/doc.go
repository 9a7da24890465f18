// Package serve is the claimstream binary's commands: `serve` (the control
// plane in one process: the embedded NATS server and the event log, the
// views, the pool file, leadership, the reactors, the provider, the REST
// API and the dashboard, telemetry, and an orderly shutdown), `config`,
// `backup` and `restore`, and the root command that adds the CLI's verbs
// (internal/cli) and `power` (internal/power/powercmd). cmd/claimstream is
// its main.
//
// A start is a sequence of phases, each logged as `start-up phase`
// (startup_timing.go); a stop runs the stages of shutdown.go in reverse.
// The tests named TestProcess* run several serve processes and are slow:
// go tool task test:process.
package serve
