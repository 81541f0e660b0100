package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	s3server "qshare/aws/s3"
	"qshare/data"
)

// S3Options size qshare bench s3.
type S3Options struct {
	// Objects of ObjectBytes each, and one of BigBytes, make the channel.
	Objects     int
	ObjectBytes int64
	BigBytes    int64
	// Dir holds the store's objects and the staged copies; a temporary
	// directory when empty.
	Dir string
}

// S3Result is what qshare bench s3 measured; its row tags are the table
// (RowsOf).
type S3Result struct {
	Objects     int     `json:"objects" row:"objects in the channel;%.0f"`
	ObjectBytes int64   `json:"object_bytes" row:"bytes per object;%.0f"`
	BigBytes    int64   `json:"big_bytes" row:"bytes of the big object (and of the model);%.0f"`
	FillS       float64 `json:"fill_s"`
	// StageS is data.Client.Stage of the channel (the small objects and
	// the big one); SyncS is `aws s3 sync` of the same prefix from the
	// same store, 0 where the AWS CLI is not installed.
	StageS     float64 `json:"stage_s" row:"stage (data.Client.Stage);%.2f;s"`
	StageMBps  float64 `json:"stage_mb_per_s" row:"stage throughput;%.1f;MB/s"`
	SyncS      float64 `json:"aws_sync_s,omitempty" row:"aws s3 sync of the same prefix;%.2f;s"`
	SyncMBps   float64 `json:"aws_sync_mb_per_s,omitempty" row:"aws s3 sync throughput;%.1f;MB/s"`
	StageRatio float64 `json:"stage_vs_sync,omitempty" row:"stage time / aws s3 sync time;%.2f;;target: at most 1"`
	// UploadS is data.Client.Upload of a model directory holding one file
	// of BigBytes (random, so gzip does not shrink it: model.tar.gz);
	// CpS is `aws s3 cp` of the same file.
	UploadS    float64 `json:"upload_s" row:"model upload (model.tar.gz);%.2f;s"`
	UploadMBps float64 `json:"upload_mb_per_s" row:"model upload throughput;%.1f;MB/s"`
	CpS        float64 `json:"aws_cp_s,omitempty" row:"aws s3 cp of the same file;%.2f;s"`
	CpMBps     float64 `json:"aws_cp_mb_per_s,omitempty" row:"aws s3 cp throughput;%.1f;MB/s"`
	// StartChannelS and StartNoneS are the medians, over startJobs jobs
	// each, of the time from SubmitServiceJob to the program's first line,
	// on a qshare serve --executor process, for a job with one channel of
	// one ObjectBytes object and for a job with none.
	StartChannelS float64 `json:"start_channel_s" row:"submit to the program's start, 1 MiB channel (median of 5);%.2f;s"`
	StartNoneS    float64 `json:"start_none_s" row:"submit to the program's start, no channel (median of 5);%.2f;s"`
	StartExtraS   float64 `json:"start_channel_extra_s" row:"what the channel adds;%.2f;s"`
	// The embedded store's PutObject and GetObject throughput (through
	// qshare serve, as jobs reach it), versitygw's and SeaweedFS's (0
	// where one is not built: its note says so), with the same client and
	// objects:
	// storeSmall objects of ObjectBytes, storeParallel at a time, and
	// storeBig of storeBigBytes, one at a time.
	EmbeddedSmallPut float64 `json:"embedded_small_put_mb_per_s" row:"embedded store PutObject, 200 × object-bytes, 8 at a time;%.1f;MB/s"`
	VersitySmallPut  float64 `json:"versitygw_small_put_mb_per_s,omitempty" row:"versitygw PutObject, the same;%.1f;MB/s"`
	SeaweedSmallPut  float64 `json:"seaweedfs_small_put_mb_per_s,omitempty" row:"SeaweedFS PutObject, the same;%.1f;MB/s"`
	EmbeddedSmallGet float64 `json:"embedded_small_get_mb_per_s" row:"embedded store GetObject, the same objects;%.1f;MB/s"`
	VersitySmallGet  float64 `json:"versitygw_small_get_mb_per_s,omitempty" row:"versitygw GetObject, the same;%.1f;MB/s"`
	SeaweedSmallGet  float64 `json:"seaweedfs_small_get_mb_per_s,omitempty" row:"SeaweedFS GetObject, the same;%.1f;MB/s"`
	EmbeddedBigPut   float64 `json:"embedded_big_put_mb_per_s" row:"embedded store PutObject, 4 × 64 MiB, one at a time;%.1f;MB/s"`
	VersityBigPut    float64 `json:"versitygw_big_put_mb_per_s,omitempty" row:"versitygw PutObject, the same;%.1f;MB/s"`
	SeaweedBigPut    float64 `json:"seaweedfs_big_put_mb_per_s,omitempty" row:"SeaweedFS PutObject, the same;%.1f;MB/s"`
	EmbeddedBigGet   float64 `json:"embedded_big_get_mb_per_s" row:"embedded store GetObject, the same objects;%.1f;MB/s"`
	VersityBigGet    float64 `json:"versitygw_big_get_mb_per_s,omitempty" row:"versitygw GetObject, the same;%.1f;MB/s"`
	SeaweedBigGet    float64 `json:"seaweedfs_big_get_mb_per_s,omitempty" row:"SeaweedFS GetObject, the same;%.1f;MB/s"`
	VersityNote      string  `json:"versitygw_note,omitempty" row:"versitygw not measured because;%s"`
	SeaweedNote      string  `json:"seaweedfs_note,omitempty" row:"SeaweedFS not measured because;%s"`
	LoadAvg1m        float64 `json:"load_avg_1m" row:"load average at start (1 min);%.2f"`
	LoadAvgEnd       float64 `json:"load_avg_1m_end" row:"load average at the end (1 min);%.2f"`
}

// RunS3 fills qshare's embedded S3 store (in this process, on a loopback
// port) with a channel of opt.Objects objects and one big one, stages it
// with package data and with `aws s3 sync`, and uploads a model of
// opt.BigBytes with package data and with `aws s3 cp`. It then starts a
// `qshare serve --executor process` (this binary), times from submit to
// the program's start jobs with a channel of one opt.ObjectBytes object
// and jobs with none, and measures PutObject and GetObject on its
// embedded store, on versitygw and on SeaweedFS (each where built), side
// by side.
func RunS3(ctx context.Context, opt S3Options) (S3Result, error) {
	r := S3Result{Objects: opt.Objects, ObjectBytes: opt.ObjectBytes, BigBytes: opt.BigBytes, LoadAvg1m: LoadAverage()}
	dir := opt.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "qshare-bench-s3-")
		if err != nil {
			return r, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := runS3Transfers(ctx, opt, dir, &r); err != nil {
		return r, err
	}
	// The transfers' files go before the stores are measured.
	for _, d := range []string{"store", "job", "sync"} {
		os.RemoveAll(filepath.Join(dir, d))
	}
	err := withServer(ctx, "", ServerOptions{Executor: "process"}, ClientOptions{Conns: 1}, e2eConfig(1), func(c *batch.Client, queues map[string]string, _ string, srv *Server) error {
		var err error
		if r.StartChannelS, r.StartNoneS, err = s3Starts(ctx, srv, c, queues["e2e"], opt.ObjectBytes); err != nil {
			return err
		}
		r.StartExtraS = round(r.StartChannelS-r.StartNoneS, 3)
		emb, vgw, sw, vgwNote, swNote, err := s3Stores(ctx, srv, dir, opt.ObjectBytes)
		r.EmbeddedSmallPut, r.EmbeddedSmallGet, r.EmbeddedBigPut, r.EmbeddedBigGet = emb.SmallPut, emb.SmallGet, emb.BigPut, emb.BigGet
		if vgw != nil {
			r.VersitySmallPut, r.VersitySmallGet, r.VersityBigPut, r.VersityBigGet = vgw.SmallPut, vgw.SmallGet, vgw.BigPut, vgw.BigGet
		}
		if sw != nil {
			r.SeaweedSmallPut, r.SeaweedSmallGet, r.SeaweedBigPut, r.SeaweedBigGet = sw.SmallPut, sw.SmallGet, sw.BigPut, sw.BigGet
		}
		r.VersityNote, r.SeaweedNote = vgwNote, swNote
		return err
	})
	r.LoadAvgEnd = LoadAverage()
	return r, err
}

// runS3Transfers is RunS3's staging and upload, in dir.
func runS3Transfers(ctx context.Context, opt S3Options, dir string, r *S3Result) error {
	srv, err := s3server.New(filepath.Join(dir, "store"))
	if err != nil {
		return err
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ep := data.Endpoint{URL: ts.URL, Region: "us-east-1", AccessKeyID: "bench", SecretAccessKey: "bench", ChecksumTrailer: true}
	c, err := data.NewClient(ctx, ep)
	if err != nil {
		return err
	}
	tm := transfermanager.New(c.S3())
	t0 := time.Now()
	if _, err := c.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		return err
	}
	put := func(key string, n int64) error {
		_, err := tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String("bench"), Key: aws.String(key), Body: io.LimitReader(rand.Reader, n)})
		return err
	}
	for i := 0; i < opt.Objects; i++ {
		if err := put(fmt.Sprintf("channel/small/%05d.bin", i), opt.ObjectBytes); err != nil {
			return err
		}
	}
	if opt.BigBytes > 0 {
		if err := put("channel/big.bin", opt.BigBytes); err != nil {
			return err
		}
	}
	r.FillS = time.Since(t0).Seconds()
	total := float64(int64(opt.Objects)*opt.ObjectBytes + opt.BigBytes)

	job := filepath.Join(dir, "job")
	dirs := data.Dirs{Input: filepath.Join(job, "input"), Model: filepath.Join(job, "model"), OutputData: filepath.Join(job, "output", "data"), Checkpoint: filepath.Join(job, "checkpoints")}
	for _, d := range []string{dirs.Input, dirs.Model, dirs.OutputData} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	fsys, err := data.DirFS(job)
	if err != nil {
		return err
	}
	defer data.CloseFS(fsys)
	out := &data.Location{Bucket: "bench", Key: "output/bench-1/output"}
	plan := data.Plan{TrainingJobName: "bench-1", Instances: 1, Dirs: dirs, Output: out, Compress: true,
		Channels: []data.ChannelPlan{{Name: "train", Type: data.S3Prefix, Source: data.Location{Bucket: "bench", Key: "channel/"}}}}
	// Each transfer is timed from a disk with no dirty pages: the one
	// before it (the fill, "aws s3 sync"'s 2 GB) would otherwise still be
	// written back while it runs, and slow down its syncs, whichever
	// client it is.
	syscall.Sync()
	t0 = time.Now()
	if err := c.Stage(ctx, fsys, plan, nil); err != nil {
		return err
	}
	r.StageS = time.Since(t0).Seconds()
	r.StageMBps = total / 1e6 / r.StageS

	awsCLI, hasCLI := exec.LookPath("aws")
	cli := func(args ...string) (float64, error) {
		cmd := exec.CommandContext(ctx, awsCLI, append(args, "--endpoint-url", ts.URL, "--only-show-errors")...)
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=bench", "AWS_SECRET_ACCESS_KEY=bench", "AWS_DEFAULT_REGION=us-east-1")
		syscall.Sync()
		t0 := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("aws %v: %v: %s", args, err, b)
		}
		return time.Since(t0).Seconds(), nil
	}
	if hasCLI == nil {
		if r.SyncS, err = cli("s3", "sync", "s3://bench/channel/", filepath.Join(dir, "sync")); err != nil {
			return err
		}
		r.SyncMBps = total / 1e6 / r.SyncS
		r.StageRatio = r.StageS / r.SyncS
	}

	if opt.BigBytes > 0 {
		// The model: the staged big object, moved into model/.
		if err := os.Rename(filepath.Join(dirs.Channel("train"), "big.bin"), filepath.Join(dirs.Model, "model.bin")); err != nil {
			return err
		}
		syscall.Sync()
		t0 = time.Now()
		if err := c.Upload(ctx, fsys, plan); err != nil {
			return err
		}
		r.UploadS = time.Since(t0).Seconds()
		r.UploadMBps = float64(opt.BigBytes) / 1e6 / r.UploadS
		if hasCLI == nil {
			if r.CpS, err = cli("s3", "cp", filepath.Join(dirs.Model, "model.bin"), "s3://bench/cp/model.bin"); err != nil {
				return err
			}
			r.CpMBps = float64(opt.BigBytes) / 1e6 / r.CpS
		}
	}
	return nil
}
