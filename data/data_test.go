package data_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"qshare/internal/longtest"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	s3server "qshare/aws/s3"
	"qshare/data"
	"qshare/trainingjob"
)

func TestMain(m *testing.M) {
	data.MaybeRun()
	// The long tests wait on stores, clocks and child programs, each
	// over a store of its own: more at once than one per core.
	longtest.MinParallel(6)
	os.Exit(m.Run())
}

// store is an S3 endpoint for one test, and a client of it.
type store struct {
	url string
	ep  data.Endpoint
	c   *data.Client
}

// embedded starts qshare's embedded store over a fresh directory.
func embedded(t *testing.T) *store {
	t.Helper()
	srv, err := s3server.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, srv)
}

// permissive starts a gofakes3 store in memory, which holds keys that the
// embedded store refuses ("a/../b"): what a hostile S3 server may list.
func permissive(t *testing.T) *store {
	return serve(t, gofakes3.New(s3mem.New()).Server())
}

func serve(t *testing.T, h http.Handler) *store {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ep := data.Endpoint{URL: ts.URL, Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test"}
	c, err := data.NewClient(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	return &store{url: ts.URL, ep: ep, c: c}
}

func (s *store) put(t *testing.T, bucket string, objs map[string]string) {
	t.Helper()
	if err := s.putErr(bucket, objs); err != nil {
		t.Fatal(err)
	}
}

// putErr creates bucket (if need be) and puts objs in it.
func (s *store) putErr(bucket string, objs map[string]string) error {
	ctx := context.Background()
	if _, err := s.c.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil && !strings.Contains(err.Error(), "BucketAlready") {
		return err
	}
	for k, v := range objs {
		if _, err := s.c.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: strings.NewReader(v)}); err != nil {
			return fmt.Errorf("put %s: %w", k, err)
		}
	}
	return nil
}

func (s *store) get(t *testing.T, bucket, key string) []byte {
	t.Helper()
	out, err := s.c.S3().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	b, _ := io.ReadAll(out.Body)
	return b
}

// job is a job's directory with SageMaker's layout, and an FS beneath it.
func job(t *testing.T) (string, data.Dirs, data.FS) {
	t.Helper()
	root := t.TempDir()
	d := data.Dirs{Input: filepath.Join(root, "input"), Model: filepath.Join(root, "model"), OutputData: filepath.Join(root, "output", "data"), Checkpoint: filepath.Join(root, "checkpoints")}
	for _, p := range []string{d.Input, d.Model, d.OutputData, d.Checkpoint} {
		os.MkdirAll(p, 0o755)
	}
	fsys, err := data.DirFS(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { data.CloseFS(fsys) })
	return root, d, fsys
}

func request(t *testing.T, payload string) *trainingjob.Request {
	t.Helper()
	r, err := trainingjob.Parse(payload)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const jobName = "awsbatchtrain-1"

func plan(t *testing.T, payload string, k, n int, d data.Dirs) data.Plan {
	t.Helper()
	p, err := data.NewPlan(request(t, payload), data.Attempt{TrainingJobName: jobName, Instance: k, Instances: n}, d)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// files lists the regular files under dir with their contents.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
		}
		return nil
	})
	return out
}

func channelPayload(uri, typ, dist string) string {
	return fmt.Sprintf(`{"AlgorithmSpecification":{"TrainingInputMode":"File"},"ResourceConfig":{"InstanceType":"ml.m5.large","InstanceCount":2},
		"InputDataConfig":[{"ChannelName":"train","DataSource":{"S3DataSource":{"S3DataType":%q,"S3Uri":%q,"S3DataDistributionType":%q}}}]}`, typ, uri, dist)
}

func TestStagePrefix(t *testing.T) {
	s := embedded(t)
	s.put(t, "bucket", map[string]string{"data/train/a.csv": "a", "data/train/sub/b.csv": "bb", "data/other/c.csv": "c"})
	_, d, fsys := job(t)
	var last data.Progress
	err := s.c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bucket/data/train", "S3Prefix", "FullyReplicated"), 0, 2, d), func(p data.Progress) { last = p })
	if err != nil {
		t.Fatal(err)
	}
	got := files(t, d.Channel("train"))
	want := map[string]string{"a.csv": "a", "sub/b.csv": "bb"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("channel holds %v, want %v", got, want)
	}
	if last.Done != 3 || last.Total != 3 || last.String() != "Downloading input data: 3 B of 3 B" {
		t.Fatalf("last progress %+v %q", last, last)
	}
}

func TestStageShardedByS3Key(t *testing.T) {
	s := embedded(t)
	objs := map[string]string{}
	for i := 0; i < 5; i++ {
		objs[fmt.Sprintf("p/%d", i)] = fmt.Sprint(i)
	}
	s.put(t, "bkt", objs)
	var all []string
	for k := 0; k < 2; k++ {
		_, d, fsys := job(t)
		if err := s.c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bkt/p/", "S3Prefix", "ShardedByS3Key"), k, 2, d), nil); err != nil {
			t.Fatal(err)
		}
		got := files(t, d.Channel("train"))
		if want := 3 - k; len(got) != want { // 5 keys over 2: 3 and 2
			t.Fatalf("instance %d got %d objects (%v), want %d", k, len(got), got, want)
		}
		for name := range got {
			all = append(all, name)
		}
	}
	sort.Strings(all)
	if fmt.Sprint(all) != "[0 1 2 3 4]" {
		t.Fatalf("the shards hold %v, want every object once", all)
	}
}

func TestStageManifest(t *testing.T) {
	s := embedded(t)
	s.put(t, "bkt", map[string]string{"imgs/x/1.png": "1", "imgs/x/2.png": "22", "imgs/x/3.png": "333",
		"m.json": `[{"prefix":"s3://bkt/imgs/"},"x/1.png","x/3.png"]`})
	_, d, fsys := job(t)
	if err := s.c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bkt/m.json", "ManifestFile", ""), 0, 1, d), nil); err != nil {
		t.Fatal(err)
	}
	if got := files(t, d.Channel("train")); fmt.Sprint(got) != "map[x/1.png:1 x/3.png:333]" {
		t.Fatalf("channel holds %v", got)
	}
}

func TestStageRefuses(t *testing.T) {
	outside := t.TempDir()
	for _, tc := range []struct {
		name    string
		objs    map[string]string
		uri     string
		typ     string
		prepare func(d data.Dirs)
		volume  bool
		want    string
	}{
		{name: "dotdot", objs: map[string]string{"p/../../evil": "x"}, uri: "s3://bkt/p/", want: "'..'"},
		{name: "absolute", objs: map[string]string{"p//etc/evil": "x"}, uri: "s3://bkt/p/", want: "absolute path"},
		{name: "manifest dotdot", objs: map[string]string{"q/../evil": "x", "m": `[{"prefix":"s3://bkt/q/"},"../evil"]`}, uri: "s3://bkt/m", typ: "ManifestFile", want: "'..'"},
		{name: "missing bucket", uri: "s3://nobucket/p/", want: "NoSuchBucket"},
		{name: "missing prefix", objs: map[string]string{"other": "x"}, uri: "s3://bkt/p/", want: "no objects under the prefix"},
		{name: "link", objs: map[string]string{"p/a": "x"}, uri: "s3://bkt/p/", want: "link",
			prepare: func(d data.Dirs) {
				os.MkdirAll(d.Channel("train"), 0o755)
				os.Symlink(filepath.Join(outside, "a"), filepath.Join(d.Channel("train"), "a"))
			}},
		{name: "linked channel directory", objs: map[string]string{"p/a": "x"}, uri: "s3://bkt/p/", want: "link",
			prepare: func(d data.Dirs) {
				os.MkdirAll(filepath.Join(d.Input, "data"), 0o755)
				os.Symlink(outside, d.Channel("train"))
			}},
		{name: "volume", objs: map[string]string{"p/a": strings.Repeat("x", 10)}, uri: "s3://bkt/p/", volume: true, want: "VolumeSizeInGB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := permissive(t)
			if tc.objs != nil {
				s.put(t, "bkt", tc.objs)
			}
			_, d, fsys := job(t)
			if tc.prepare != nil {
				tc.prepare(d)
			}
			typ := tc.typ
			if typ == "" {
				typ = "S3Prefix"
			}
			p := plan(t, channelPayload(tc.uri, typ, ""), 0, 1, d)
			if tc.volume {
				p.VolumeBytes = 5
			}
			err := s.c.Stage(context.Background(), fsys, p, nil)
			if err == nil {
				t.Fatal("staging succeeded")
			}
			if r := data.Reason(err); !strings.HasPrefix(r, "ClientError: Data download failed: ") || !strings.Contains(r, tc.want) {
				t.Fatalf("reason %q, want a ClientError naming %q", r, tc.want)
			}
			if got := files(t, outside); len(got) != 0 {
				t.Fatalf("staging wrote outside the job's directory: %v", got)
			}
		})
	}
}

func TestStageRefusedCredentials(t *testing.T) {
	t.Parallel()
	s := embedded(t)
	s.put(t, "bkt", map[string]string{"p/a": "x"})
	// gofakes3 checks no signature: a store that checks them is the
	// real test (TestThirdPartyStores). Here: a store that is not there.
	ep := data.Endpoint{URL: "http://127.0.0.1:1", Region: "us-east-1", AccessKeyID: "k", SecretAccessKey: "s"}
	c, err := data.NewClient(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	_, d, fsys := job(t)
	err = c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bkt/p/", "S3Prefix", ""), 0, 1, d), nil)
	var de *data.Error
	if !asError(err, &de) || de.Client || !strings.HasPrefix(de.Reason, "InternalServerError: Data download failed: ") {
		t.Fatalf("a store that does not answer gave %v", err)
	}
}

func TestUpload(t *testing.T) {
	s := embedded(t)
	s.put(t, "out", nil)
	root, d, fsys := job(t)
	os.WriteFile(filepath.Join(d.Model, "weights.bin"), []byte("w"), 0o644)
	os.MkdirAll(filepath.Join(d.Model, "sub"), 0o755)
	os.WriteFile(filepath.Join(d.Model, "sub", "cfg.json"), []byte("{}"), 0o644)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("secret"), 0o600)
	os.Symlink(secret, filepath.Join(d.Model, "stolen"))
	os.WriteFile(filepath.Join(d.OutputData, "metrics.txt"), []byte("m"), 0o644)
	_ = root
	p := plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://out/results"}}`, 0, 1, d)
	if err := s.c.Upload(context.Background(), fsys, p); err != nil {
		t.Fatal(err)
	}
	model := untar(t, s.get(t, "out", "results/awsbatchtrain-1/output/model.tar.gz"))
	if fmt.Sprint(model) != "map[sub/cfg.json:{} weights.bin:w]" {
		t.Fatalf("model.tar.gz holds %v (the link must be left out)", model)
	}
	if out := untar(t, s.get(t, "out", "results/awsbatchtrain-1/output/output.tar.gz")); fmt.Sprint(out) != "map[metrics.txt:m]" {
		t.Fatalf("output.tar.gz holds %v", out)
	}
	// NONE: the files as they are.
	p = plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://out/raw/","CompressionType":"NONE"}}`, 0, 1, d)
	if err := s.c.Upload(context.Background(), fsys, p); err != nil {
		t.Fatal(err)
	}
	if got := string(s.get(t, "out", "raw/awsbatchtrain-1/output/model/sub/cfg.json")); got != "{}" {
		t.Fatalf("uncompressed model file holds %q", got)
	}
}

func untar(t *testing.T, b []byte) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		out[h.Name] = string(c)
	}
}

func TestCheckpoints(t *testing.T) {
	s := embedded(t)
	s.put(t, "ckpt", map[string]string{"run/step-1.pt": "one"})
	payload := `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"CheckpointConfig":{"S3Uri":"s3://ckpt/run"}}`
	_, d, fsys := job(t)
	p := plan(t, payload, 0, 1, d)
	if err := s.c.RestoreCheckpoints(context.Background(), fsys, p); err != nil {
		t.Fatal(err)
	}
	if got := files(t, d.Checkpoint); fmt.Sprint(got) != "map[step-1.pt:one]" {
		t.Fatalf("restored %v", got)
	}
	k := s.c.NewCheckpointer(fsys, p)
	os.WriteFile(filepath.Join(d.Checkpoint, "step-2.pt"), []byte("two"), 0o644)
	if _, err := k.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, err := k.Save(context.Background()); err != nil || n != 0 {
		t.Fatalf("a second Save with nothing changed uploaded %d files (%v)", n, err)
	}
	// A second instance that shares nothing with the first resumes from S3.
	_, d2, fsys2 := job(t)
	if err := s.c.RestoreCheckpoints(context.Background(), fsys2, plan(t, payload, 0, 1, d2)); err != nil {
		t.Fatal(err)
	}
	if got := files(t, d2.Checkpoint); fmt.Sprint(got) != "map[step-1.pt:one step-2.pt:two]" {
		t.Fatalf("the second instance restored %v", got)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct{ payload, want string }{
		{`{"AlgorithmSpecification":{"TrainingInputMode":"Pipe"}}`, "TrainingInputMode is Pipe"},
		{`{"InputDataConfig":[{"ChannelName":"t","InputMode":"Pipe","DataSource":{"S3DataSource":{"S3Uri":"s3://bkt/p"}}}]}`, `channel "t").InputMode is Pipe`},
		{`{"InputDataConfig":[{"ChannelName":"t","DataSource":{"FileSystemDataSource":{"FileSystemId":"fs-1"}}}]}`, "FileSystemDataSource is not supported"},
		{`{"InputDataConfig":[{"ChannelName":"t","DataSource":{"S3DataSource":{"S3Uri":"http://b/p"}}}]}`, "is not an S3 URI"},
		{`{"OutputDataConfig":{"S3OutputPath":"s3://bkt","CompressionType":"ZSTD"}}`, "CompressionType"},
	} {
		var r trainingjob.Request
		if err := jsonUnmarshal(tc.payload, &r); err != nil {
			t.Fatal(err)
		}
		err := data.Validate(&r)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error naming %q", tc.payload, err, tc.want)
		}
	}
	ok := `{"AlgorithmSpecification":{"TrainingInputMode":"FastFile"},"InputDataConfig":[{"ChannelName":"t","DataSource":{"S3DataSource":{"S3Uri":"s3://bkt/p","S3DataDistributionType":"ShardedByS3Key"}}}]}`
	var r trainingjob.Request
	jsonUnmarshal(ok, &r)
	if err := data.Validate(&r); err != nil {
		t.Fatal(err)
	}
	if got := string(data.InputDataConfigJSON(&r)); got != `{"t":{"TrainingInputMode":"FastFile","S3DistributionType":"ShardedByS3Key","RecordWrapperType":"None"}}` {
		t.Fatalf("inputdataconfig.json %s", got)
	}
}

// TestRun runs a program under the wrapper, as the process executor does:
// the channel is there before it starts, and its model is in S3 after it
// exited, with its exit code kept.
func TestRun(t *testing.T) {
	s := embedded(t)
	s.put(t, "bkt", map[string]string{"in/sm_train.sh": "echo trained > \"$1\"/model.txt; exit 3"})
	s.put(t, "out", nil)
	root, d, _ := job(t)
	p := plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://out"},
		"InputDataConfig":[{"ChannelName":"sm_drivers","DataSource":{"S3DataSource":{"S3Uri":"s3://bkt/in"}}}]}`, 0, 1, d)
	cmd := wrapped(t, s.ep, p, root, "/bin/sh", filepath.Join(d.Channel("sm_drivers"), "sm_train.sh"), d.Model)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 3 {
		t.Fatalf("the wrapper exited with %v, want the program's 3; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "Downloading input data: ") {
		t.Errorf("no progress in the log:\n%s", out)
	}
	if m := untar(t, s.get(t, "out", "awsbatchtrain-1/output/model.tar.gz")); m["model.txt"] != "trained\n" {
		t.Fatalf("model.tar.gz holds %v", m)
	}
}

// wrapped returns the command that runs command under the wrapper (this
// test binary, whose TestMain calls data.MaybeRun), as the process
// executor does, with its failure file at root/output/failure.
func wrapped(t *testing.T, ep data.Endpoint, p data.Plan, root string, command ...string) *exec.Cmd {
	t.Helper()
	self, _ := os.Executable()
	w := data.Wrapper{Plan: p, Endpoint: ep, Root: root, FailureFile: filepath.Join(root, "output", "failure")}
	argv, env, err := data.Wrap(self, command, os.Environ(), w)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	return cmd
}

func asError(err error, target **data.Error) bool { return errors.As(err, target) }

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// TestRunStoreDownDuringUpload: the store stops answering while the
// program runs; the wrapper's upload is retried (the SDK's backoff, and
// the whole object ObjectTries times) and then fails the attempt with its reason, even though the program
// succeeded: a job is not SUCCEEDED until its model is in S3.
func TestRunStoreDownDuringUpload(t *testing.T) {
	t.Parallel()
	srv, err := s3server.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	down := filepath.Join(t.TempDir(), "down")
	var tries atomic.Int64
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := os.Stat(down); err == nil {
			tries.Add(1)
			http.Error(w, "<Error><Code>ServiceUnavailable</Code></Error>", http.StatusServiceUnavailable)
			return
		}
		srv.ServeHTTP(w, r)
	}))
	s.put(t, "bkt", map[string]string{"in/data.txt": "x"})
	root, d, _ := job(t)
	p := plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://bkt/out"},
		"InputDataConfig":[{"ChannelName":"train","DataSource":{"S3DataSource":{"S3Uri":"s3://bkt/in"}}}]}`, 0, 1, d)
	failure := filepath.Join(root, "output", "failure")
	os.MkdirAll(filepath.Dir(failure), 0o755)
	cmd := wrapped(t, s.ep, p, root, "/bin/sh", "-c", "echo m > \"$1\"/m; touch \"$2\"", "sh", d.Model, down)
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("the wrapper exited with %d, want 1; output:\n%s", cmd.ProcessState.ExitCode(), out)
	}
	reason, _ := os.ReadFile(failure)
	if !strings.HasPrefix(string(reason), "InternalServerError: Artifact upload failed: ") {
		t.Fatalf("failure file %q", reason)
	}
	if n := tries.Load(); n < data.MaxAttempts*data.ObjectTries {
		t.Fatalf("the store saw %d requests while down, want the SDK's %d tries of each of the %d whole uploads", n, data.MaxAttempts, data.ObjectTries)
	}
}

// TestRunUploadOnly: the wrapper of a command, in its upload-only mode
// (what the process executor runs after a stop's kill), runs no program
// and uploads the model as it is.
func TestRunUploadOnly(t *testing.T) {
	s := embedded(t)
	s.put(t, "out", nil)
	root, d, _ := job(t)
	p := plan(t, `{"ResourceConfig":{"InstanceType":"ml.m5.large"},"OutputDataConfig":{"S3OutputPath":"s3://out"}}`, 0, 1, d)
	if err := os.WriteFile(filepath.Join(d.Model, "model.txt"), []byte("left by a killed program\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := wrapped(t, s.ep, p, root, "/bin/sh", "-c", "echo ran > "+filepath.Join(d.Model, "ran"))
	argv, env, ok := data.UploadOnlyCommand(w.Args, w.Env)
	if !ok || len(argv) != 1 {
		t.Fatalf("UploadOnlyCommand: %q, %v", argv, ok)
	}
	cmd := exec.Command(argv[0])
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if m := untar(t, s.get(t, "out", "awsbatchtrain-1/output/model.tar.gz")); m["model.txt"] != "left by a killed program\n" || m["ran"] != "" {
		t.Fatalf("model.tar.gz holds %v", m)
	}
	if _, _, ok := data.UploadOnlyCommand([]string{"/bin/true"}, os.Environ()); ok {
		t.Error("a command that is not wrapped has an upload-only mode")
	}
}
