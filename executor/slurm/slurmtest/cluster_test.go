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

// TestAccounting starts a cluster with slurmdbd over its own MariaDB (and
// slurmctld registering the cluster there itself): a job's end is in sacct.
func TestAccounting(t *testing.T) {
	c := StartT(t, Options{CPUs: 2, Partition: "p", Accounting: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Command(ctx, "sbatch", "--parsable", "--wrap", "exit 3")
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	var got string
	for ctx.Err() == nil {
		got, err = c.Command(ctx, "sacct", "-X", "-n", "-P", "-j", id, "-o", "JobIDRaw,State,ExitCode")
		if err == nil && strings.TrimSpace(got) == id+"|FAILED|3:0" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("sacct of job %s = %q, %v; want %s|FAILED|3:0", id, got, err, id)
}
