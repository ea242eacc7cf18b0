//go:build !race

package testpar

const raceEnabled = false
