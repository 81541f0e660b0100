package data_test

import (
	"context"
	"crypto/rand"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	s3server "qshare/aws/s3"
	"qshare/data"
)

// BenchmarkUploadModel uploads a model directory holding one file of 256
// MiB of random bytes as model.tar.gz (Upload, as qshare bench s3 does
// with 1 GiB) into the embedded store on a loopback port in this
// process, so that one CPU profile (-cpuprofile) shows the client's
// share (tar, gzip, the transfer manager, the CRC32 trailer) beside the
// store's (the parts' MD5, their files, the completion).
func BenchmarkUploadModel(b *testing.B) {
	size := int64(256 << 20)
	srv, err := s3server.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := context.Background()
	// As the executors reach the embedded store on its host (server's
	// s3Endpoint): bodies with a CRC32 trailer, over loopback.
	c, err := data.NewClient(ctx, data.Endpoint{URL: ts.URL, Region: "us-east-1", AccessKeyID: "k", SecretAccessKey: "s", ChecksumTrailer: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.S3().CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bench")}); err != nil {
		b.Fatal(err)
	}
	job := b.TempDir()
	dirs := data.Dirs{Input: filepath.Join(job, "input"), Model: filepath.Join(job, "model"), OutputData: filepath.Join(job, "output", "data"), Checkpoint: filepath.Join(job, "checkpoints")}
	for _, d := range []string{dirs.Input, dirs.Model, dirs.OutputData} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(dirs.Model, "model.bin"))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.CopyN(f, rand.Reader, size); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	fsys, err := data.DirFS(job)
	if err != nil {
		b.Fatal(err)
	}
	plan := data.Plan{TrainingJobName: "bench-1", Instances: 1, Dirs: dirs, Output: &data.Location{Bucket: "bench", Key: "out"}, Compress: true}
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Upload(ctx, fsys, plan); err != nil {
			b.Fatal(err)
		}
	}
}
