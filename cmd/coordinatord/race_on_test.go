//go:build race

package main

// raceEnabled says the tests run under the race detector; the binary under test is then built
// with it too.
const raceEnabled = true
