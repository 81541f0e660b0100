package slurm

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"qshare"
	"qshare/aws/s3/s3test"
	"qshare/executor"
	"qshare/executor/slurm/slurmtest"
	"qshare/trainingjob"
)

// killedJob runs an attempt of nodes nodes of typ whose program ignores
// SIGTERM and writes a model on the first node, stops it with a short
// grace period, and returns its exit, its log and its model.tar.gz in S3
// at out (nil when there is none). With restart, the executor is closed
// once the program runs and a new one recovers the attempt without its
// job.json (as after a crash between sbatch and the record) and stops
// it, and the model's upload to the store takes 8 s longer than the 5 s
// that an attempt which does not upload is given after the kill. (Only
// the model's: the output's upload, which follows it, slowed too, added
// 8 s more to the package's longest test and showed nothing more.)
func killedJob(t *testing.T, c *slurmtest.Cluster, id, typ string, nodes int, out string, restart bool) (executor.Exit, string, map[string]string) {
	t.Helper()
	var slow atomic.Bool
	ep, s3c := s3test.StartWith(t, map[string]map[string]string{"qshare-data": {}}, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if slow.Load() && (r.Method == http.MethodPut || r.Method == http.MethodPost) && strings.Contains(r.URL.Path, "/model.tar.gz") {
				time.Sleep(8 * time.Second)
			}
			h.ServeHTTP(w, r)
		})
	})
	o := Options{Config: testConfig(t.TempDir()), Env: c.Env(), Step: []string{os.Args[0]}, S3: ep}
	e, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { e.Close() }()
	// The first node is the first of SM_HOSTS: Slurm may put a one-node
	// job on n1 or n2.
	sh := `trap "" TERM; first=${SM_HOSTS#*\"}; if [ "$SM_CURRENT_HOST" = "${first%%\"*}" ]; then echo "weights of the first node" > "$SM_MODEL_DIR/model.bin"; fi; ` +
		`echo "trapped on $SM_CURRENT_HOST"; sleep 300`
	var p map[string]any
	if err := json.Unmarshal([]byte(payloadOf(sh, typ, nodes, nil)), &p); err != nil {
		t.Fatal(err)
	}
	p["OutputDataConfig"] = map[string]any{"S3OutputPath": out}
	b, _ := json.Marshal(p)
	s := executor.Spec{JobID: id, JobName: id, AttemptID: id + "-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{typ: int64(nodes)}, Payload: string(b)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	trapped := []string{"trapped on n"} // n1 or n2
	if nodes == 2 {
		trapped = []string{"trapped on n1\n", "trapped on n2\n"}
	}
	for _, want := range trapped {
		waitForLog(t, h.LogPath, want, time.Minute)
	}
	if restart {
		e.Close()
		if err := os.Remove(filepath.Join(e.attemptDir(s.AttemptID), "job.json")); err != nil {
			t.Fatal(err)
		}
		if e, err = New(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		if r, err := e.Recover(ctx, executor.Handle{AttemptID: s.AttemptID}); err != nil || r != executor.Running {
			t.Fatalf("Recover = %v, %v", r, err)
		}
		slow.Store(true)
	}
	if err := e.Stop(ctx, s.AttemptID, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	x, err := e.Wait(ctx, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(h.LogPath)
	if !x.Stopped || x.Signal != "SIGKILL" || !strings.HasPrefix(x.Reason, "Essential process killed by signal SIGKILL at the end of the stop grace period") {
		t.Fatalf("exit %+v, want killed at the grace period's end; log:\n%s", x, log)
	}
	req, err := trainingjob.Parse(s.Payload)
	if err != nil {
		t.Fatal(err)
	}
	key := "output/" + s.TrainingJobName(req) + "/output/model.tar.gz"
	if _, err := s3c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("qshare-data"), Key: aws.String(key)}); err != nil {
		return x, string(log), nil
	}
	return x, string(log), s3test.TarGz(t, s3c, "qshare-data", key)
}

// TestStopUploadsAfterTheKill: a one-node attempt whose program ignores
// SIGTERM outlives the stop's grace period; the step runner kills it and
// runs the data wrapper alone to upload the model, as SageMaker does after
// its kill, before the batch job ends. An upload that fails says so in
// the attempt's reason.
func TestStopUploadsAfterTheKill(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	// After a restart that lost job.json, the executor learns from
	// step.json that the job uploads, and waits for its slow upload. It
	// takes some 10 s, mostly waiting, so it runs at once in this test's
	// own turn: as a parallel subtest it waited behind the package's
	// others and ended alone, 10 s after them.
	t.Run("recovered", func(t *testing.T) {
		x, log, model := killedJob(t, c, "killed-recovered", "ml.m5.large", 1, "s3://qshare-data/output", true)
		if model["model.bin"] != "weights of the first node\n" {
			t.Fatalf("model.tar.gz holds %q after the kill; exit %+v; log:\n%s", model, x, log)
		}
	})
	t.Run("uploaded", func(t *testing.T) {
		t.Parallel()
		x, log, model := killedJob(t, c, "killed", "ml.m5.large", 1, "s3://qshare-data/output", false)
		if model["model.bin"] != "weights of the first node\n" || strings.Contains(x.Reason, "not uploaded") {
			t.Fatalf("model.tar.gz holds %q after the kill; exit %+v; log:\n%s", model, x, log)
		}
	})
	t.Run("nobucket", func(t *testing.T) {
		t.Parallel()
		x, log, _ := killedJob(t, c, "killed-nobucket", "ml.m5.large", 1, "s3://no-such-bucket/output", false)
		if !strings.Contains(x.Reason, "after the kill, the model was not uploaded: ") || !strings.Contains(x.Reason, "NoSuchBucket") {
			t.Fatalf("reason %q, want the failed upload's; log:\n%s", x.Reason, log)
		}
	})
}

// twoNodeStopUploadsAfterTheKill (TestWholeNodes) is
// TestStopUploadsAfterTheKill for an attempt of two nodes, whose step
// runners run under srun: the first node's model reaches S3.
func twoNodeStopUploadsAfterTheKill(t *testing.T, c *slurmtest.Cluster) {
	x, log, model := killedJob(t, c, "killed-two", "ml.g5.12xlarge", 2, "s3://qshare-data/output", false)
	if model["model.bin"] != "weights of the first node\n" || len(model) != 1 {
		t.Fatalf("model.tar.gz holds %q after the kill; exit %+v; log:\n%s", model, x, log)
	}
}
