package slurmtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTwoNodesWithGPUs starts two nodes with two fake GPUs each and runs a
// job on both; slurmctld took Prompt's setting.
func TestTwoNodesWithGPUs(t *testing.T) {
	c := StartT(t, Options{Nodes: 2, CPUs: 4, GPUs: 2, Partition: "p", Prompt: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := c.Command(ctx, "scontrol", "show", "config"); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out, "batch_sched_delay=0") {
		t.Errorf("scontrol show config has no batch_sched_delay=0 (Prompt):\n%s", out)
	}
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

// TestFailedStartCleansUp starts a cluster with a context that has
// already ended: Start spawns munged, gives up while waiting for it with
// the context's error, and leaves no directory behind. Under the race
// detector it also checks that the daemons' output, which a failed start
// reads before it stops them, is not read while os/exec writes it.
func TestFailedStartCleansUp(t *testing.T) {
	opt := Options{CPUs: 2, Partition: "p"}
	SkipUnavailable(t, opt)
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "qshare-slurm-*"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := Start(ctx, opt)
	if err == nil {
		c.Close()
		t.Fatal("Start with an ended context succeeded")
	}
	if c != nil {
		t.Errorf("Start returned a cluster with its error %v", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Start's error %q is not the context's", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "qshare-slurm-*"))
	for _, d := range after {
		if !slices.Contains(before, d) {
			t.Errorf("a failed start left its directory %s", d)
		}
	}
}
