package auth

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Lines written at once, from many goroutines, are each whole and each
// there; a reopened log is appended to, never rewritten.
func TestAuditAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := a.Write(&AuditEntry{Time: time.Now(), Method: "POST", Path: "/v1/x", Outcome: "ok", Status: 200, RequestID: strings.Repeat("r", i+1)}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	a.Close()
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the audit log's mode: %v %v; want 0600", st.Mode(), err)
	}
	a, err = OpenAudit(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(&AuditEntry{Method: "POST", Path: "/after-restart", Outcome: "denied", Status: 403}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	f, _ := os.Open(path)
	defer f.Close()
	seen := map[int]bool{}
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e AuditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d is not JSON: %q", n+1, sc.Text())
		}
		seen[len(e.RequestID)] = true
		n++
		if n == 51 && e.Path != "/after-restart" {
			t.Fatalf("the last line is %+v", e)
		}
	}
	if n != 51 || len(seen) != 51 {
		t.Fatalf("%d lines (%d distinct), want 51", n, len(seen))
	}
}

func TestReadOnlyAction(t *testing.T) {
	for a, want := range map[string]bool{"batch:DescribeServiceJob": true, "batch:ListServiceJobs": true, "batch:GetServiceJobLogs": true,
		"batch:SubmitServiceJob": false, "batch:TagResource": false, "batch:UntagResource": false, "batch:TerminateServiceJobs": false} {
		if readOnly(a) != want {
			t.Errorf("readOnly(%s) = %v", a, !want)
		}
	}
}
