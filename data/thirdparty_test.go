package data_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"qshare/aws/s3/s3test"
	"qshare/data"
	"qshare/internal/python"
)

// thirdParties are the S3 servers that no one here wrote, each of which
// checks every signature.
var thirdParties = []struct {
	name  string
	start func(testing.TB, map[string]map[string]string) (data.Endpoint, *s3.Client)
}{{"versitygw", s3test.Versitygw}, {"SeaweedFS", s3test.SeaweedFS}}

// TestThirdPartyStores runs the data contract's checks below against
// each third-party server, in parallel subtests, one server started over a
// fresh directory for all of a subtest's checks (a start takes a few
// seconds); a subtest skips, with a message, where its binary is absent.
func TestThirdPartyStores(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts third-party S3 servers")
	}
	for _, tp := range thirdParties {
		t.Run(tp.name, func(t *testing.T) {
			t.Parallel()
			ep, _ := tp.start(t, nil)
			c, err := data.NewClient(context.Background(), ep)
			if err != nil {
				t.Fatal(err)
			}
			s := &store{url: ep.URL, ep: ep, c: c}
			t.Run("contract", func(t *testing.T) { thirdPartyStore(t, s) })
			t.Run("refuses", func(t *testing.T) { thirdPartyStoreRefuses(t, tp.name, s) })
			t.Run("run", func(t *testing.T) { thirdPartyStoreRun(t, s) })
		})
	}
}

// thirdPartyStore stages (a prefix, a manifest, shards), uploads a model
// large enough to go in parts, keeps checkpoints and restores them on a
// second instance; boto3 fills the bucket.
func thirdPartyStore(t *testing.T, s *store) {
	py, ok := python.With("boto3")
	if !ok {
		t.Log("python3 with boto3 is not installed: the bucket is filled with the Go SDK")
		s.put(t, "tp-data", map[string]string{"in/a.csv": "a", "in/sub/b.csv": "bb", "in/c.csv": "ccc", "m.json": `[{"prefix":"s3://tp-data/in/"},"a.csv","sub/b.csv"]`})
	} else {
		// boto3, the client that fills the bucket in the story.
		script := `import boto3, sys
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3],
                  config=boto3.session.Config(s3={"addressing_style": "path"}))
s3.create_bucket(Bucket="tp-data")
for k, v in {"in/a.csv": b"a", "in/sub/b.csv": b"bb", "in/c.csv": b"ccc", "m.json": b'[{"prefix":"s3://tp-data/in/"},"a.csv","sub/b.csv"]'}.items():
    s3.put_object(Bucket="tp-data", Key=k, Body=v)
`
		if out, err := exec.Command(py, "-c", script, s.url, s.ep.AccessKeyID, s.ep.SecretAccessKey).CombinedOutput(); err != nil {
			t.Fatalf("boto3: %v\n%s", err, out)
		}
	}
	s.put(t, "tp-out", nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name, payload string
		k, n          int
		want          string
	}{
		{"prefix", channelPayload("s3://tp-data/in/", "S3Prefix", ""), 0, 1, "map[a.csv:a c.csv:ccc sub/b.csv:bb]"},
		{"manifest", channelPayload("s3://tp-data/m.json", "ManifestFile", ""), 0, 1, "map[a.csv:a sub/b.csv:bb]"},
		{"shard 0 of 2", channelPayload("s3://tp-data/in/", "S3Prefix", "ShardedByS3Key"), 0, 2, "map[a.csv:a sub/b.csv:bb]"},
		{"shard 1 of 2", channelPayload("s3://tp-data/in/", "S3Prefix", "ShardedByS3Key"), 1, 2, "map[c.csv:ccc]"},
	} {
		_, d, fsys := job(t)
		if err := s.c.Stage(ctx, fsys, plan(t, tc.payload, tc.k, tc.n, d), nil); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := fmt.Sprint(files(t, d.Channel("train"))); got != tc.want {
			t.Fatalf("%s: staged %s, want %s", tc.name, got, tc.want)
		}
	}

	// The model: 20 MiB of random weights, so that it goes up in parts.
	weights := make([]byte, 20<<20)
	rand.Read(weights)
	_, d, fsys := job(t)
	payload := `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://tp-out/o"},"CheckpointConfig":{"S3Uri":"s3://tp-out/ck"}}`
	p := plan(t, payload, 0, 1, d)
	os.WriteFile(filepath.Join(d.Model, "w.bin"), weights, 0o644)
	os.WriteFile(filepath.Join(d.OutputData, "metrics.txt"), []byte("m"), 0o644)
	os.WriteFile(filepath.Join(d.Checkpoint, "step-1"), []byte("1"), 0o644)
	if err := s.c.Upload(ctx, fsys, p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.c.NewCheckpointer(fsys, p).Save(ctx); err != nil {
		t.Fatal(err)
	}
	if m := untar(t, s.get(t, "tp-out", "o/"+jobName+"/output/model.tar.gz")); !bytes.Equal([]byte(m["w.bin"]), weights) {
		t.Fatalf("model.tar.gz's w.bin is %d bytes, not the %d written", len(m["w.bin"]), len(weights))
	}
	if m := untar(t, s.get(t, "tp-out", "o/"+jobName+"/output/output.tar.gz")); m["metrics.txt"] != "m" {
		t.Fatalf("output.tar.gz holds %v", m)
	}
	_, d2, fsys2 := job(t)
	if err := s.c.RestoreCheckpoints(ctx, fsys2, plan(t, payload, 0, 1, d2)); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(files(t, d2.Checkpoint)); got != "map[step-1:1]" {
		t.Fatalf("a second instance restored %s", got)
	}
}

// thirdPartyStoreRefuses: against a store that checks signatures, a
// wrong secret is the job's ClientError; a missing bucket and an empty
// prefix are SageMaker's reasons; and a hostile key that the server (name)
// holds is refused by the staging, with nothing written outside the job's
// directory.
func thirdPartyStoreRefuses(t *testing.T, name string, s *store) {
	s.put(t, "bkt", map[string]string{"p/a": "x"})
	ctx := context.Background()
	stage := func(ep data.Endpoint, uri string) error {
		c, err := data.NewClient(ctx, ep)
		if err != nil {
			t.Fatal(err)
		}
		_, d, fsys := job(t)
		return c.Stage(ctx, fsys, plan(t, channelPayload(uri, "S3Prefix", ""), 0, 1, d), nil)
	}
	wrong := s.ep
	wrong.SecretAccessKey = "not-the-secret"
	for _, tc := range []struct {
		name string
		ep   data.Endpoint
		uri  string
		want string
	}{
		{"wrong secret", wrong, "s3://bkt/p/", "the store refused the credentials"},
		{"missing bucket", s.ep, "s3://nobucket/p/", "NoSuchBucket"},
		{"empty prefix", s.ep, "s3://bkt/nothing/", "no objects under the prefix"},
	} {
		err := stage(tc.ep, tc.uri)
		if err == nil || !strings.HasPrefix(data.Reason(err), "ClientError: Data download failed: ") || !strings.Contains(data.Reason(err), tc.want) {
			t.Errorf("%s: %v, want a ClientError naming %q", tc.name, err, tc.want)
		}
	}
	// Hostile keys: what the server lists as it was put, staging refuses;
	// what it normalizes ("h//x" listed as "h/x") is staged where its
	// listed key says, inside the channel.
	for _, key := range []string{"h/../../evil", "h//etc/evil", "h/./x", "h/a/../../evil"} {
		if err := s.putErr("hostile", map[string]string{key: "x"}); err != nil {
			t.Logf("%s refuses the key %q: %v", name, key, err)
		}
	}
	list, err := s.c.S3().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("hostile")})
	if err != nil {
		t.Fatal(err)
	}
	hostile := 0
	for _, o := range list.Contents {
		k := aws.ToString(o.Key)
		t.Logf("%s lists %q", name, k)
		for _, seg := range strings.Split(strings.TrimPrefix(k, "h/"), "/") {
			if seg == "" || seg == "." || seg == ".." {
				hostile++
				break
			}
		}
	}
	if len(list.Contents) == 0 {
		return
	}
	outside := t.TempDir()
	root, d, fsys := job(t)
	err = s.c.Stage(ctx, fsys, plan(t, channelPayload("s3://hostile/h/", "S3Prefix", ""), 0, 1, d), nil)
	switch {
	case hostile > 0 && (err == nil || !strings.HasPrefix(data.Reason(err), "ClientError: Data download failed: ")):
		t.Fatalf("staging %d hostile keys that %s lists: %v, want a ClientError", hostile, name, err)
	case hostile > 0 && len(files(t, d.Input)) != 0:
		t.Fatalf("a refused staging wrote %v", files(t, d.Input))
	case hostile == 0 && err != nil:
		t.Fatalf("staging the keys %s normalized: %v", name, err)
	}
	if got := files(t, outside); len(got) != 0 {
		t.Fatalf("staging wrote outside the job's directory: %v", got)
	}
	for rel := range files(t, root) {
		if !strings.HasPrefix(rel, "input/data/train/") {
			t.Fatalf("staging wrote %s, outside the channel's directory", rel)
		}
	}
}

// thirdPartyStoreRun runs a program under the wrapper (as the process
// executor does): the channel is there before it starts, and its model is
// in the store after it exited.
func thirdPartyStoreRun(t *testing.T, s *store) {
	s.put(t, "run-in", map[string]string{"in/sm_train.sh": "echo trained > \"$1\"/model.txt"})
	s.put(t, "run-out", nil)
	root, d, _ := job(t)
	p := plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://run-out"},
		"InputDataConfig":[{"ChannelName":"sm_drivers","DataSource":{"S3DataSource":{"S3Uri":"s3://run-in/in"}}}]}`, 0, 1, d)
	if out, err := wrapped(t, s.ep, p, root, "/bin/sh", filepath.Join(d.Channel("sm_drivers"), "sm_train.sh"), d.Model).CombinedOutput(); err != nil {
		t.Fatalf("the wrapper: %v\n%s", err, out)
	}
	if m := untar(t, s.get(t, "run-out", jobName+"/output/model.tar.gz")); m["model.txt"] != "trained\n" {
		t.Fatalf("model.tar.gz holds %v", m)
	}
}
