package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// LoadAverage returns the machine's 1-minute load average from
// /proc/loadavg, or -1 where there is none: a condition of a run that its
// report states beside the figures.
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	x, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return x
}

// fsNames are the file systems a data directory is likely to be on, by the
// magic number statfs(2) reports.
var fsNames = map[int64]string{
	0x01021994: "tmpfs",
	0xEF53:     "ext4", // also ext2 and ext3
	0x58465342: "xfs",
	0x9123683E: "btrfs",
	0x794C7630: "overlay",
	0x6969:     "nfs",
	0x2FC12FC1: "zfs",
	0x65735546: "fuse",
	0x858458F6: "ramfs",
}

// fsName names a file system by its statfs magic number.
func fsName(magic int64) string {
	if n, ok := fsNames[magic]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", magic)
}
