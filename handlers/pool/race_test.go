//go:build race

package pool

// raceEnabled: the tests run under the race detector, several times slower.
const raceEnabled = true
