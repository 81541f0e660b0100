// Package security_test attacks a real `qshare serve` as a hostile web page
// and a hostile local user would (issue 14, findings 1 and 2), and shows
// each attack refused and nothing done, while the AWS SDK for Go and the
// AWS CLI still work unchanged.
//
// It builds the qshare binary once. The test binary itself is also the
// attacking client when it is started with QSHARE_SECURITY_CLIENT set: the
// other-Unix-user test runs it as a second user (created when the tests run
// as root) with setpriv.
package security_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qshare/internal/longtest"
	"qshare/internal/serveproc"
)

// bin is the qshare binary under test; client is a copy of this test
// binary that any user may run; root is the repository root.
var bin, client, root string

func TestMain(m *testing.M) {
	if url := os.Getenv("QSHARE_SECURITY_CLIENT"); url != "" {
		os.Exit(runClient(url))
	}
	// Most tests have a server, data directory and files of their own and
	// mostly wait (on Python clients, jobs, the plan race's rounds): they
	// run in parallel with each other, four at once. They share the Unix
	// users alice and bob (ensureUser adds each once), which they only run
	// jobs and commands as; each checks its own job's processes by pid.
	// The tests that flood a server or measure its latency or memory, and
	// the one that changes the environment (TestServeTLS), run one at a
	// time before them.
	longtest.MinParallel(4)
	dir, err := os.MkdirTemp("", "qshare-security-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		// The other user must reach and run the client copy.
		if err := os.Chmod(dir, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		root, _ = filepath.Abs("../..")
		var err error
		if bin, err = serveproc.Build(dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		self, err := os.Executable()
		if err == nil {
			client = filepath.Join(dir, "client")
			err = serveproc.CopyExecutable(self, client)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "copying the test binary:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// answer is what the client prints: the status and the AWS error's type
// and message.
type answer struct {
	Status  int    `json:"status"`
	Type    string `json:"type"`
	Message string `json:"message"`
	Body    string `json:"body"`
}

// runClient is the attacking client: it sends QSHARE_SECURITY_METHOD
// (POST) of QSHARE_SECURITY_BODY to url with the headers an AWS SDK sends,
// and prints the answer as JSON.
func runClient(url string) int {
	method := os.Getenv("QSHARE_SECURITY_METHOD")
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if b := os.Getenv("QSHARE_SECURITY_BODY"); b != "" {
		body = strings.NewReader(b)
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode, Type: resp.Header.Get("X-Amzn-ErrorType"), Body: string(b)}
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) == nil {
		a.Message = e.Message
	}
	_ = json.NewEncoder(os.Stdout).Encode(a)
	return 0
}
