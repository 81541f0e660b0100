package auth

import (
	"path/filepath"
	"testing"
)

// A job's key is the same when granted again, also by a server started
// again on the same secret (a recovered attempt's wrapper keeps its key);
// it is in force from Grant to Revoke only, and another attempt's differs.
func TestJobKeysGrantRevoke(t *testing.T) {
	file := filepath.Join(t.TempDir(), "s3-job-keys")
	j := NewJobKeys(file, "us-east-1", "000000000000")
	id, secret, err := j.Grant("a-1")
	if err != nil {
		t.Fatal(err)
	}
	if p, s, ok := j.Keys().Principal(id); !ok || s != secret || p.Name != "job-a-1" {
		t.Fatalf("the granted key %s is not in force: %v %v", id, p, ok)
	}
	if d := Evaluate(mustPrincipal(t, j, id).Policies, "s3:GetObject", []string{"arn:aws:s3:::b/k"}); d != Allowed {
		t.Errorf("a job key may not read S3: %v", d)
	}
	if d := Evaluate(mustPrincipal(t, j, id).Policies, "batch:SubmitServiceJob", []string{"*"}); d == Allowed {
		t.Errorf("a job key may call the Batch API")
	}
	again := NewJobKeys(file, "us-east-1", "000000000000")
	if id2, secret2, err := again.Grant("a-1"); err != nil || id2 != id || secret2 != secret {
		t.Errorf("granted again after a restart: %s %s %v, want the same key %s", id2, secret2, err, id)
	}
	if other, _, _ := j.Grant("a-2"); other == id {
		t.Errorf("two attempts have the same key")
	}
	j.Revoke("a-1")
	if _, _, ok := j.Keys().Principal(id); ok {
		t.Errorf("a revoked key is in force")
	}
	if _, _, ok := j.Keys().Principal(mustID(t, j, "a-2")); !ok {
		t.Errorf("revoking one attempt's key ended another's")
	}
}

func mustPrincipal(t *testing.T, j *JobKeys, id string) *Principal {
	t.Helper()
	p, _, ok := j.Keys().Principal(id)
	if !ok {
		t.Fatalf("key %s not in force", id)
	}
	return p
}

func mustID(t *testing.T, j *JobKeys, attempt string) string {
	t.Helper()
	id, _, err := j.Grant(attempt)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
