package s3

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPartNotKeptHidesThePath: when a part cannot be written to the
// store's disk, the answer says why without naming the data directory.
func TestPartNotKeptHidesThePath(t *testing.T) {
	root := t.TempDir()
	// A file where the parts' directory would go: MkdirAll fails.
	if err := os.WriteFile(filepath.Join(root, tmpDir), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPut, "/b/k?partNumber=1&uploadId=12", strings.NewReader("data"))
	name, status, code, msg := spoolPart(root, r)
	if name != "" || status != http.StatusServiceUnavailable || code != "ServiceUnavailable" {
		t.Fatalf("spoolPart = %q, %d, %q, %q; want a 503 ServiceUnavailable", name, status, code, msg)
	}
	if strings.Contains(msg, root) || !strings.Contains(msg, "not a directory") {
		t.Errorf("message %q names the server's path or not the cause", msg)
	}
}
