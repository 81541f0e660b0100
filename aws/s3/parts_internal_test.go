package s3

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
)

// TestPartNotKeptHidesThePath: when an upload's parts cannot be kept on
// the store's disk, the answer says why without naming the data
// directory.
func TestPartNotKeptHidesThePath(t *testing.T) {
	root := t.TempDir()
	// A file where the parts' directory would go: MkdirAll fails.
	dir := filepath.Join(root, "parts")
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := newUploads(dir, root, nil).CreateMultipartUpload("bkt", "k", nil)
	var e *gofakes3.ErrorResponse
	if id != "" || !errors.As(err, &e) || e.Code != gofakes3.ErrInternal {
		t.Fatalf("CreateMultipartUpload = %q, %v; want an InternalError", id, err)
	}
	if strings.Contains(e.Message, root) || !strings.Contains(e.Message, "not a directory") {
		t.Errorf("message %q names the server's path or not the cause", e.Message)
	}
}
