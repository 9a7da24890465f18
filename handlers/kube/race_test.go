//go:build race

package kube_test

// raceEnabled: the tests run under the race detector, which allocates on
// its own.
const raceEnabled = true
