//go:build !race

package main

// raceEnabled: the tests run under the race detector, several times slower.
const raceEnabled = false
