package processe2e_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"qshare/data"
	"qshare/internal/jobuser"
)

// TestRunAsData: on a server without --auth, a job run as another user
// (--run-as) stages its channel from the embedded store and uploads its
// model there (issue 31, point 4), with the S3 key of its attempt, which
// the guard takes from that user for S3 only and only while the attempt
// runs. The same user with the static key, or with the job's key for the
// Batch API, is still refused.
func TestRunAsData(t *testing.T) {
	skipShort(t)
	u := jobuser.Lookup(t)
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl is not installed: skipping the requests made as the job's user")
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// The job's user runs the wrapper, the qshare binary under test.
	must(t, os.Chmod(filepath.Dir(bin), 0o711))
	base, _ := jobuser.Dir(t, "qshare-runas-data-e2e")
	dataDir := filepath.Join(base, "data")
	t.Cleanup(func() { killLeftovers(t, dataDir) })
	s := startServer(t, dataDir, serverOpts{args: []string{"--run-as", jobuser.Name}})
	s.setup(map[string]int32{cpu: 1}, share{name: "QS1", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyReserve})

	ctx := context.Background()
	c, err := data.NewClient(ctx, data.Endpoint{URL: s.endpoint, Region: "us-east-1", AccessKeyID: "qshare", SecretAccessKey: "qshare"})
	must(t, err)
	_, err = c.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("team")})
	must(t, err)
	_, err = c.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team"), Key: aws.String("in/a.txt"), Body: strings.NewReader("hello\n")})
	must(t, err)

	// asJobUser sends a request signed for service with the key given,
	// from a process of the job's user (curl's SigV4), and returns the
	// answer's status and body.
	asJobUser := func(service, path, keyID, secret string) string {
		t.Helper()
		cmd := exec.Command(curl, "-sS", "--aws-sigv4", "aws:amz:us-east-1:"+service, "--user", keyID+":"+secret,
			"-H", "X-Amz-Content-Sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			"-w", " %{http_code}", s.endpoint+path)
		if service == "batch" {
			cmd.Args = append(cmd.Args, "-X", "POST", "-H", "Content-Type: application/json")
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir, cmd.Env = "/", []string{"HOME=" + base}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("curl as %s: %v\n%s", jobuser.Name, err, out)
		}
		t.Logf("as %s, %s %s signed with %s: %s", jobuser.Name, service, path, keyID, clipped(string(out)))
		return strings.TrimSpace(string(out))
	}
	ok := func(answer string) bool { return strings.HasSuffix(answer, " 200") }
	const list, queues = "/team?list-type=2", "/v1/describejobqueues"

	gate := filepath.Join(base, "gate")
	// The job prints its wrapper's key (its own user's process: the job
	// can read it, and so can the test) and waits at the gate.
	entry := []string{"/bin/sh", "-c", `id -u; cat "$SM_CHANNEL_TRAIN/a.txt" > "$SM_MODEL_DIR/model.txt"
tr '\0' '\n' < /proc/$PPID/environ | grep -o '"accessKeyId":"[^"]*","secretAccessKey":"[^"]*"'
while [ ! -e "` + gate + `" ]; do sleep 0.1; done`}
	id := s.submit(job{name: "runas-data", share: "QS1", entrypoint: entry, payload: map[string]any{
		"InputDataConfig": []map[string]any{{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]any{
			"S3DataType": "S3Prefix", "S3Uri": "s3://team/in"}}}},
		"OutputDataConfig": map[string]any{"S3OutputPath": "s3://team/out"}}})
	log := s.awaitLog(id, 1, "secretAccessKey")
	m := regexp.MustCompile(`"accessKeyId":"([^"]*)","secretAccessKey":"([^"]*)"`).FindStringSubmatch(log)
	if m == nil || !strings.Contains(log, "\n"+u.Uid+"\n") {
		t.Fatalf("the job's log has no key of its wrapper, or the job does not run as uid %s:\n%s", u.Uid, log)
	}
	keyID, secret := m[1], m[2]
	if keyID == "qshare" {
		t.Fatalf("the attempt's wrapper has the static key, not one of its own")
	}
	if got := asJobUser("s3", list, keyID, secret); !ok(got) || !strings.Contains(got, "<Key>in/a.txt</Key>") {
		t.Errorf("the job's user with its attempt's key: ListObjectsV2 answered %s, want the bucket's objects", got)
	}
	if got := asJobUser("batch", queues, keyID, secret); ok(got) {
		t.Errorf("the job's user with its attempt's key reached the Batch API: %s", got)
	}
	if got := asJobUser("s3", list, "qshare", "qshare"); ok(got) || !strings.Contains(got, "AccessDenied") {
		t.Errorf("the job's user with the static key: ListObjectsV2 answered %s, want AccessDenied", got)
	}
	must(t, os.WriteFile(gate, nil, 0o644))

	d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded)
	arn := aws.ToString(d.LatestAttempt.ServiceResourceId.Value)
	key := "out/" + arn[strings.LastIndex(arn, "/")+1:] + "/output/model.tar.gz"
	obj, err := c.S3().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("team"), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("the model of the job run as %s is not in the store (%s): %v\n%s", jobuser.Name, key, err, s.mustLogs(id, 1))
	}
	defer obj.Body.Close()
	if got, want := tarDigest(t, obj.Body, "model.txt"), sha256.Sum256([]byte("hello\n")); got != hex.EncodeToString(want[:]) {
		t.Errorf("model.txt in %s is %q, want the channel's a.txt", key, got)
	}
	if got := asJobUser("s3", list, keyID, secret); ok(got) {
		t.Errorf("the attempt's key is still taken after the attempt ended: %s", got)
	}
}

// clipped is s cut to 300 bytes, for a log line.
func clipped(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
