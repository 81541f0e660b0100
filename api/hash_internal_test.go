package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// TestRequestHashIsMarshalHash pins requestHash to its stored definition,
// sha256 of json.Marshal of the request without its token: jobs keep the
// hash, so a different encoding would turn a retried submit after an
// upgrade into a "different request".
func TestRequestHashIsMarshalHash(t *testing.T) {
	prio, n := int32(7), int32(3)
	for _, in := range []submitIn{
		{},
		{JobName: "j", JobQueue: "q", ServiceRequestPayload: `{"a":"<b>&"}`, ServiceJobType: "SAGEMAKER_TRAINING", ClientToken: "t"},
		{JobName: "j", JobQueue: "arn:aws:batch:us-east-1:000000000000:job-queue/q", SchedulingPriority: &prio, QuotaShareName: "A",
			RetryStrategy: &retryStrategyWire{Attempts: &n}, Tags: map[string]string{"b": "2", "a": "1\u2028"}},
	} {
		want := in
		want.ClientToken = ""
		b, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		for range 2 { // the second call reuses the pooled buffer
			if got := requestHash(in); got != hex.EncodeToString(s[:]) {
				t.Errorf("requestHash(%+v) = %s, want sha256 of %s", in, got, b)
			}
		}
	}
}
