//go:build qshare_experiment

package sqlite

import "fmt"

// This file is compiled only into measuring builds, with the build tag
// qshare_experiment; the product (experiment_off.go) has no switch at all.
// experiment is set when linking such a build, to measure what durability
// costs (docs/performance.md, "What durability costs"):
//
//	go build -tags qshare_experiment -ldflags "-X qshare/sqlite.experiment=nostore" -o /tmp/qshare-nostore ./cmd/qshare
//
// Values:
//   - "nostore": Commit encodes each change, as always, and then returns
//     without writing it: nothing is kept, not even across a clean restart;
//   - "sync-normal": synchronous=NORMAL instead of FULL (the WAL is fsynced
//     at checkpoints only);
//   - "sync-off": synchronous=OFF (never fsynced).
//
// The default, "", behaves as the product. Open refuses any other value, so
// a misspelt experiment cannot pass for the product.
var experiment string

// storeMode is the synchronous pragma and whether commits are kept, for the
// experiment in effect.
func storeMode() (synchronous string, noStore bool, err error) {
	switch experiment {
	case "":
		return "FULL", false, nil
	case "nostore":
		return "FULL", true, nil
	case "sync-normal":
		return "NORMAL", false, nil
	case "sync-off":
		return "OFF", false, nil
	}
	return "", false, fmt.Errorf("this binary was linked with the unknown store experiment %q (sqlite.experiment: nostore, sync-normal or sync-off)", experiment)
}
