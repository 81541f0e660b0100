//go:build !qshare_experiment

package sqlite

// storeMode is the product's: every commit is kept, and the WAL is fsynced
// at each (synchronous=FULL). Measuring builds, with the build tag
// qshare_experiment, replace this file with experiment.go, whose modes are
// set at link time; the product has no such switch, so no -ldflags can make
// it skip a write.
func storeMode() (synchronous string, noStore bool, err error) {
	return "FULL", false, nil
}
