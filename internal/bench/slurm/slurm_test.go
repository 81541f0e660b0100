package slurm

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"qshare/executor/slurm/slurmtest"
)

func TestRenderHasBenchmarkSettings(t *testing.T) {
	c := Config{Dir: "/tmp/x", Host: "node1", CtldPort: 40001, SlurmdPorts: []int{40002},
		Options: slurmtest.Options{CPUs: 64, Partition: "bench"}}
	got := c.Render()
	lines := map[string]string{}
	for _, l := range strings.Split(got, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			t.Fatalf("line %q is not KEY=VALUE", l)
		}
		if _, dup := lines[k]; dup {
			t.Fatalf("key %s set twice", k)
		}
		lines[k] = v
	}
	want := map[string]string{
		"SchedulerType":         "sched/backfill",
		"SelectType":            "select/cons_tres",
		"SlurmdParameters":      "config_overrides",
		"AccountingStorageType": "accounting_storage/none",
		"SlurmctldHost":         "node1(127.0.0.1)",
		"SlurmctldPort":         "40001",
		"SlurmdPort":            "40002",
		"AuthInfo":              "socket=/tmp/x/munge/munge.socket",
		"NodeName":              "node1 NodeAddr=127.0.0.1 CPUs=64 State=UNKNOWN",
		"PartitionName":         "bench Nodes=node1 Default=YES MaxTime=INFINITE State=UP",
	}
	for k, v := range want {
		if lines[k] != v {
			t.Errorf("%s = %q, want %q", k, lines[k], v)
		}
	}
	if _, ok := lines["SchedulerParameters"]; ok {
		t.Error("SchedulerParameters is set; the benchmark uses Slurm's defaults")
	}
	// Every path stays inside the cluster's directory.
	for k, v := range lines {
		_, path, _ := strings.Cut(v, "/")
		if (strings.HasPrefix(v, "/") || strings.HasPrefix(v, "socket=/")) && !strings.HasPrefix("/"+path, "/tmp/x/") {
			t.Errorf("%s = %q points outside the cluster directory", k, v)
		}
	}
}

func TestCountQueued(t *testing.T) {
	n, err := CountQueued("12\n13\n\n14_2\n15_[3-9]\n")
	if err != nil || n != 4 {
		t.Errorf("CountQueued = %d, %v; want 4", n, err)
	}
	if n, err := CountQueued(""); err != nil || n != 0 {
		t.Errorf("CountQueued(empty) = %d, %v; want 0", n, err)
	}
	if _, err := CountQueued("slurm_load_jobs error: Unable to contact slurm controller\n"); err == nil {
		t.Error("an error message was counted as jobs instead of failing")
	}
}

func TestNodeStates(t *testing.T) {
	if idle, _ := NodeStates("idle\n"); !idle {
		t.Error("idle node not idle")
	}
	for _, in := range []string{"", "down*\n", "idle\nmixed\n", "idle*\n"} {
		if idle, _ := NodeStates(in); idle {
			t.Errorf("NodeStates(%q) idle; want not", in)
		}
	}
}

func TestCountStates(t *testing.T) {
	got := countStates("COMPLETED\nCOMPLETED\nFAILED\n\n")
	if got["COMPLETED"] != 2 || got["FAILED"] != 1 || len(got) != 2 {
		t.Errorf("countStates = %v", got)
	}
}

// TestClusterThroughput starts a real cluster and runs a few jobs. It needs
// Slurm and root, and runs only with QSHARE_TEST_SLURM=1, so that the
// ordinary test run does not depend on Slurm.
func TestClusterThroughput(t *testing.T) {
	if os.Getenv("QSHARE_TEST_SLURM") == "" {
		t.Skip("set QSHARE_TEST_SLURM=1 to run against a local Slurm")
	}
	if err := Available(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := c.Config().Dir
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Close left %s behind", dir)
		}
	}()
	res, err := c.Run(ctx, RunOptions{Jobs: 20, Clients: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Completed != 20 {
		t.Errorf("completed %d of 20", res.Completed)
	}
	if res.Wall < res.SubmitWall {
		t.Errorf("wall %s shorter than the submit phase %s", res.Wall, res.SubmitWall)
	}
	t.Logf("%d jobs, %d clients: %.1f jobs/s, %.1f submits/s", res.Jobs, res.Clients, res.JobsPerSecond(), res.SubmitsPerSecond())
}
