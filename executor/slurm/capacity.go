package slurm

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"qshare"
	"qshare/executor"
)

var _ executor.CapacityChecker = (*Executor)(nil)

// CheckCapacity warns when a service environment with these limits can ask
// for more whole nodes of a type than its partition has (sinfo counts
// them), or names a type the configuration does not map. Types with
// shareNodes are not counted: their instances share nodes. It returns ""
// when all fits, and says so when sinfo cannot be asked.
func (e *Executor) CheckCapacity(limits qshare.Capacity) string {
	var warns []string
	types := limits.Types()
	sort.Strings(types)
	nodes := map[string]int{}
	for _, typ := range types {
		want := limits[typ]
		t, ok := e.o.Config.InstanceTypes[typ]
		if !ok {
			warns = append(warns, fmt.Sprintf("instance type %s is not in the Slurm executor's configuration: jobs of it are refused", typ))
			continue
		}
		if t.ShareNodes || want <= 0 {
			continue
		}
		n, ok := nodes[t.Partition]
		if !ok {
			var err error
			if n, err = e.partitionNodes(t.Partition); err != nil {
				warns = append(warns, fmt.Sprintf("cannot count the nodes of partition %s: %v", t.Partition, err))
				continue
			}
			nodes[t.Partition] = n
		}
		if want > int64(n) {
			warns = append(warns, fmt.Sprintf("the capacity limits allow %d × %s, but its partition %s has %d nodes: jobs beyond that wait in Slurm; lower maxCapacity to at most %d", want, typ, t.Partition, n, n))
		}
	}
	return strings.Join(warns, "; ")
}

// partitionNodes counts the nodes of a partition: sinfo prints one line per
// group of nodes in one state, with its node count.
func (e *Executor) partitionNodes(partition string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := e.command(ctx, "sinfo", "--noheader", "--partition="+partition, "--format=%D")
	if err != nil {
		return 0, err
	}
	total := 0
	for _, line := range strings.Fields(out) {
		n, err := strconv.Atoi(line)
		if err != nil {
			return 0, fmt.Errorf("sinfo printed %q; expected node counts", line)
		}
		total += n
	}
	return total, nil
}
