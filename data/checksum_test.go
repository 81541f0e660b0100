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
	"qshare/aws/s3/s3test"
)

// TestStageChecksChecksums: an object put whole whose bytes changed on
// the store's disk after its upload fails the staging with the SDK's
// checksum error, where before the channel got the changed bytes (the
// transfer manager reads an object as its part 1, for which the store
// gave no checksum); so does one put in three parts (the transfer
// manager's default upload: CRC32, COMPOSITE) whose part 2 changed,
// where before the store answered it as one part, whose COMPOSITE
// checksum no SDK checks against the whole object's bytes: the transfer
// manager reads it by its parts now, each checked against its own. The
// untouched objects stage as they were put.
func TestStageChecksChecksums(t *testing.T) {
	t.Parallel()
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
	for _, key := range []string{"ok/big.bin", "bad2/big.bin"} {
		if _, err := tm.UploadObject(context.Background(), &transfermanager.UploadObjectInput{Bucket: aws.String("bucket"), Key: aws.String(key), Body: bytes.NewReader(big)}); err != nil {
			t.Fatal(err)
		}
	}
	// A byte of each bad object changes on the store's disk.
	for key, at := range map[string]int64{"bad1/small.bin": 4095, "bad2/big.bin": 8<<20 + 1} {
		s3test.Corrupt(t, dir, "bucket", key, at)
	}

	_, d, fsys := job(t)
	if err := s.c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bucket/ok/", "S3Prefix", "FullyReplicated"), 0, 1, d), nil); err != nil {
		t.Fatalf("staging the untouched objects: %v", err)
	}
	got, err := os.ReadFile(filepath.Join(d.Channel("train"), "big.bin"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the staged big object differs from what was put (%v)", err)
	}
	for _, key := range []string{"bad1/small.bin", "bad2/big.bin"} {
		_, d, fsys := job(t)
		err := s.c.Stage(context.Background(), fsys, plan(t, channelPayload("s3://bucket/"+path.Dir(key)+"/", "S3Prefix", "FullyReplicated"), 0, 1, d), nil)
		if err == nil || !strings.Contains(err.Error(), "checksum") {
			t.Errorf("staging %s, changed on the store's disk: %v, want a checksum error", key, err)
		}
	}
}
