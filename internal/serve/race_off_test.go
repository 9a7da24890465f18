//go:build !race

package serve

// raceEnabled: the tests run under the race detector, several times slower.
const raceEnabled = false
