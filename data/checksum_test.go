package data_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"

	s3server "qshare/aws/s3"
)

// TestStageChecksChecksums: an object put whole whose bytes changed on
// the store's disk after its upload fails the staging with the SDK's
// checksum error, where before the channel got the changed bytes (the
// transfer manager reads an object as its part 1, for which the store
// gave no checksum). The untouched objects, one of them put in three
// parts, stage as they were put. (An object put in parts has a COMPOSITE
// checksum, which no SDK checks against a whole object's bytes.)
func TestStageChecksChecksums(t *testing.T) {
	dir := t.TempDir()
	srv, err := s3server.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, srv)
	s.put(t, "bucket", map[string]string{"ok/small.bin": "intact", "bad1/small.bin": strings.Repeat("x", 4096)})
	big := make([]byte, 20<<20) // three parts of the transfer manager's 8 MiB
	rand.Read(big)
	tm := transfermanager.New(s.c.S3())
	for _, key := range []string{"ok/big.bin"} {
		if _, err := tm.UploadObject(context.Background(), &transfermanager.UploadObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key), Body: bytes.NewReader(big)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"bad1/small.bin"} {
		name := filepath.Join(dir, "buckets", "bucket", key)
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-1] ^= 0xff
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	_, d, fsys := job(t)
	if err := s.c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bucket/ok/", "S3Prefix", "FullyReplicated"), 0, 1, d), nil); err != nil {
		t.Fatalf("staging the untouched objects: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(d.Channel("train"), "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the staged big object differs from what was put (%v)", err)
	}
	for _, key := range []string{"bad1/small.bin"} {
		_, d, fsys := job(t)
		err := s.c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bucket/"+path.Dir(key)+"/", "S3Prefix", "FullyReplicated"), 0, 1, d), nil)
		if err == nil || !strings.Contains(err.Error(), "checksum") {
			t.Errorf("staging %s, changed on the store's disk: %v, want a checksum error", key, err)
		}
	}
}
