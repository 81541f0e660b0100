// Package longtest says whether the long test scenarios run: the
// 10-failover runs, the big Slurm and Kubernetes sets and the soaks. They
// run where the environment has QSHARE_LONG=1, which .ci/run sets in a
// step of its own after the README's `go test ./...`; without it each
// scenario runs a short instance, so that the README's command stays under
// five minutes on two cores with every component installed.
package longtest

import (
	"os"
	"testing"
)

// Env is the variable that turns the long scenarios on.
const Env = "QSHARE_LONG"

// On reports whether the long scenarios run (Env is set and not "0").
func On() bool {
	v := os.Getenv(Env)
	return v != "" && v != "0"
}

// Pick returns long when the long scenarios run, else short.
func Pick[T any](short, long T) T {
	if On() {
		return long
	}
	return short
}

// Only skips t unless the long scenarios run. why says what makes t long
// and what the README's command runs in its place, so that the skip
// message tells a reader both.
func Only(t testing.TB, why string) {
	t.Helper()
	if !On() {
		t.Skipf("a long scenario, which runs with %s=1 (.ci/run's long step): %s", Env, why)
	}
}
