package slurmtest

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestTwoNodesWithGPUs starts two nodes with two fake GPUs each and runs a
// job on both.
func TestTwoNodesWithGPUs(t *testing.T) {
	c := StartT(t, Options{Nodes: 2, CPUs: 4, GPUs: 2, Partition: "p"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Command(ctx, "srun", "-N2", "--gres=gpu:2", "--exclusive", "sh", "-c", "echo $SLURMD_NODENAME")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(out)
	if len(got) != 2 || got[0] == got[1] {
		t.Errorf("srun -N2 ran on %q, want n1 and n2", got)
	}
}
