package process

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare"
)

// mountTable returns this process's mount table without the fields that
// change as mounts are used (the mount IDs stay: a leaked mount adds one).
// mountTable returns the host's mounts whose mount point is /opt/ml or
// below it, or below one of under (the test's directories): where a job's
// bind mount would show if it leaked out of the job's namespace. The rest
// of the table is left out, since other programs on the machine (a
// container engine starting containers, another package's tests) change it
// while the test runs.
func mountTable(t *testing.T, under ...string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		for _, p := range append([]string{optmlRoot}, under...) {
			if f[4] == p || strings.HasPrefix(f[4], p+"/") {
				kept = append(kept, line)
				break
			}
		}
	}
	return strings.Join(kept, "\n")
}

// TestOptMLNamespace runs, as root, jobs that use the SageMaker paths
// under /opt/ml: each sees its own job's directory there, writes its model
// through it into the job's directory on the host, cannot see another
// job's /opt/ml, and leaves the host's mount table as it was.
func TestOptMLNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the process executor gives jobs /opt/ml only when it runs as root; this test does not run as root")
	}
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	defer e.Close()
	if !e.optml {
		t.Fatal("an executor that runs as root does not give its jobs /opt/ml")
	}
	before := mountTable(t, dir)
	trainDir := filepath.Join(dir, "train") // a local channel, staged nowhere: named by its host path
	os.Mkdir(trainDir, 0o755)
	os.WriteFile(filepath.Join(trainDir, "a.csv"), []byte("1,2\n"), 0o644)
	// Two jobs at once: each marks /opt/ml/model with its name, waits for
	// the other to have marked its own, then lists what it sees there.
	sc := `set -e
cat /opt/ml/input/config/hyperparameters.json; echo
echo x > /opt/ml/model/m
echo "$QSHARE_JOB_ID" > /opt/ml/model/"$QSHARE_JOB_ID"
ls /opt/ml/input/data/
ls "$SM_CHANNEL_TRAIN"
echo "model=$SM_MODEL_DIR ckpt=$SM_CHECKPOINT_DIR tj=$TRAINING_JOB_NAME arn=$TRAINING_JOB_ARN"
mkdir -p /opt/ml/input && echo "export A=1" > /opt/ml/input/sm_training.env && . /opt/ml/input/sm_training.env && echo "A=$A"
touch "$MARK_DIR/$QSHARE_JOB_ID"; while [ "$(ls "$MARK_DIR" | wc -l)" -lt 2 ]; do sleep 0.05; done
echo "sees: $(ls /opt/ml/model | tr '\n' ' ')"`
	marks := t.TempDir()
	os.Chmod(marks, 0o777)
	var wg sync.WaitGroup
	logs := map[string]string{}
	var mu sync.Mutex
	for _, job := range []string{"optml-a", "optml-b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := payloadOf(sc, func(p map[string]any) {
				p["HyperParameters"] = map[string]string{"lr": job}
				p["Environment"] = map[string]string{"MARK_DIR": marks, "PATH": os.Getenv("PATH")}
				p["InputDataConfig"] = []any{map[string]any{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]string{"S3Uri": "file://" + trainDir}}}}
				p["CheckpointConfig"] = map[string]string{"LocalPath": "/opt/ml/ck"}
			})
			s := spec(job, 1, p)
			s.ResourceARN = "arn:aws:sagemaker:us-east-1:000000000000:training-job/awsbatch-t-" + job
			h, err := e.Start(context.Background(), s)
			if err != nil {
				t.Errorf("%s: Start: %v", job, err)
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			x, err := e.Wait(ctx, s.AttemptID)
			b, _ := os.ReadFile(h.LogPath)
			if err != nil || !x.Succeeded() {
				t.Errorf("%s: exit %+v, %v; log:\n%s", job, x, err, b)
			}
			mu.Lock()
			logs[job] = string(b)
			mu.Unlock()
		}()
	}
	wg.Wait()
	for job, log := range logs {
		other := map[string]string{"optml-a": "optml-b", "optml-b": "optml-a"}[job]
		for _, want := range []string{`{"lr":"` + job + `"}`, "a.csv", "model=/opt/ml/model ckpt=/opt/ml/ck tj=awsbatch-t-" + job + " arn=arn:aws:sagemaker:us-east-1:000000000000:training-job/awsbatch-t-" + job + "\n", "A=1", "sees: m " + job + " \n"} {
			if !strings.Contains(log, want) {
				t.Errorf("%s: the log lacks %q:\n%s", job, want, log)
			}
		}
		if strings.Contains(log, "sees: "+other) || strings.Contains(log, " "+other+" ") {
			t.Errorf("%s saw %s's /opt/ml:\n%s", job, other, log)
		}
		m, err := os.ReadFile(filepath.Join(dir, "jobs", job, "model", "m"))
		if err != nil || string(m) != "x\n" {
			t.Errorf("%s: /opt/ml/model/m is not in the job's model directory: %q, %v", job, m, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "jobs", job, "input", "sm_training.env")); err != nil {
			t.Errorf("%s: /opt/ml/input/sm_training.env is not in the job's input directory: %v", job, err)
		}
	}
	// The namespaces were made by threads of the supervisor, each of which
	// must have ended with its fork: none of those left may be in a job's.
	e.mu.Lock()
	sup := e.sup.id.PID
	e.mu.Unlock()
	host, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(sup) + "/task")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("the supervisor's threads: %v", err)
	}
	for _, task := range tasks {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(sup) + "/task/" + task.Name() + "/ns/mnt")
		if err == nil && ns != host {
			t.Errorf("thread %s of the supervisor is in mount namespace %s, not the host's %s", task.Name(), ns, host)
		}
	}
	if after := mountTable(t, dir); after != before {
		t.Errorf("the host's mount table changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if ents, err := os.ReadDir(optmlRoot); err == nil && len(ents) > 0 {
		t.Errorf("the host's %s holds %d entries after the jobs: a job wrote to it", optmlRoot, len(ents))
	}
}

// TestOptMLRunAs: a job of another user gets /opt/ml too, bound by root
// before the drop, and runs as its user there.
func TestOptMLRunAs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := lookupJobUser("nobody"); err != nil {
		t.Skip("no user nobody here")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	e := newExecutor(t, dir, func(o *Options) { o.RunAs = "nobody" })
	defer e.Close()
	s := spec("optml-nobody", 1, payloadOf(`id -u; echo y > /opt/ml/model/m; touch /opt/ml/../escape 2>/dev/null || echo no-escape`, nil))
	h, x := run(t, e, s)
	b, _ := os.ReadFile(h.LogPath)
	if !x.Succeeded() {
		t.Fatalf("exit %+v; log:\n%s", x, b)
	}
	if u, _ := lookupJobUser("nobody"); !strings.HasPrefix(string(b), strconv.Itoa(int(u.UID))+"\n") {
		t.Errorf("the job did not run as nobody:\n%s", b)
	}
	if !strings.Contains(string(b), "no-escape") {
		t.Errorf("nobody could write /opt/escape:\n%s", b)
	}
	if m, err := os.ReadFile(filepath.Join(dir, "jobs", "optml-nobody", "model", "m")); err != nil || string(m) != "y\n" {
		t.Errorf("model: %q, %v", m, err)
	}
	// A program that nobody cannot run is looked for by the step, as
	// nobody: the attempt ends with the reason a failed fork gives.
	_, x = run(t, e, spec("optml-missing", 1, payloadOf([]string{"no-such-program-anywhere"}, nil)))
	if x.ExitCode != 127 || !strings.HasPrefix(x.Reason, "CannotStartError: ") {
		t.Errorf("a missing program: %+v, want exit code 127 and a CannotStartError reason", x)
	}
}

// TestOptMLRefusedWithout: an executor that cannot give /opt/ml refuses,
// at submit, a payload whose entry point names it, and says why.
func TestOptMLRefusedWithout(t *testing.T) {
	e := newExecutor(t, t.TempDir(), func(o *Options) { o.NoOptML = true })
	defer e.Close()
	err := e.Validate(smDriversOptML(), nil)
	var qe *qshare.Error
	if !errors.As(err, &qe) || qe.Code != qshare.EINVALID || !strings.Contains(err.Error(), "/opt/ml") {
		t.Fatalf("Validate: %v, want EINVALID about /opt/ml", err)
	}
	if err := e.Validate(payloadOf(`echo "$SM_MODEL_DIR"`, nil), nil); err != nil {
		t.Fatalf("a job that does not name /opt/ml is refused: %v", err)
	}
	for cmd, want := range map[string]bool{"/opt/mlflow/bin/python x": false, "cat /opt/ml": true, "ls /opt/ml;": true, "x=/opt/ml-old:/opt/ml/model": true, "/opt/ml_x /opt/ml.d": false} {
		if got := namesOptML([]string{"/bin/sh", "-c", cmd}); got != want {
			t.Errorf("namesOptML(%q) = %v, want %v", cmd, got, want)
		}
	}
}

// smDriversOptML is the SDK's own sm_drivers payload, with its entry point
// as ModelTrainer writes it.
func smDriversOptML() string {
	return payloadOf([]string{"/bin/bash", "-c", "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"}, nil)
}
