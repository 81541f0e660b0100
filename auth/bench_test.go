package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// BenchmarkVerify is the server's cost of verifying one signed submit of
// about 1 KiB, as the AWS SDK signs it: the CPU that --auth adds to a
// request. Compare with the server's CPU per submit (docs/performance.md).
func BenchmarkVerify(b *testing.B) {
	k, err := Parse([]byte(exampleFile), "000000000000")
	if err != nil {
		b.Fatal(err)
	}
	v := NewVerifier("us-east-1", func() *Keyring { return k })
	body := []byte(`{"jobName":"j","jobQueue":"training","quotaShareName":"QS1","serviceJobType":"SAGEMAKER_TRAINING","serviceRequestPayload":"` + strings.Repeat("x", 900) + `"}`)
	req, _ := http.NewRequest("POST", "http://127.0.0.1:8750/v1/submitservicejob", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Amz-Sdk-Invocation-Id", "b0c0e8b5-7e4f-4a55-9b0a-4a7c0d6f7a01")
	req.Header.Set("Amz-Sdk-Request", "attempt=1; max=1")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: aliceID, SecretAccessKey: aliceSecret}, req, hex.EncodeToString(sum[:]), "batch", "us-east-1", time.Now()); err != nil {
		b.Fatal(err)
	}
	req.Host = "127.0.0.1:8750"
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Body = io.NopCloser(bytes.NewReader(body))
		if _, err := v.Verify(req); err != nil {
			b.Fatal(err)
		}
	}
}
