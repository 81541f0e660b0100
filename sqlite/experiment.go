package sqlite

import "fmt"

// experiment is set only when linking a binary for measuring what
// durability costs (docs/performance.md, "What durability costs"):
//
//	go build -ldflags "-X qshare/sqlite.experiment=nostore" -o /tmp/qshare-nostore ./cmd/qshare
//
// Values:
//   - "nostore": Commit encodes each change, as always, and then returns
//     without writing it: nothing is kept, not even across a clean restart;
//   - "sync-normal": synchronous=NORMAL instead of FULL (the WAL is fsynced
//     at checkpoints only);
//   - "sync-off": synchronous=OFF (never fsynced).
//
// The default, "", is the product. Open refuses any other value, so a
// misspelt experiment cannot pass for the product.
var experiment string

// synchronous is the synchronous pragma for the experiment in effect.
func synchronous() (string, error) {
	switch experiment {
	case "", "nostore":
		return "FULL", nil
	case "sync-normal":
		return "NORMAL", nil
	case "sync-off":
		return "OFF", nil
	}
	return "", fmt.Errorf("this binary was linked with the unknown store experiment %q (sqlite.experiment: nostore, sync-normal or sync-off)", experiment)
}
