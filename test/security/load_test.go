package security_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"qshare/internal/longtest"
	"qshare/internal/serveproc"
)

// Load from outside (issue 30, point 6): each test here runs the real
// binary and failed on the server before the connection limits, the
// refusal budget, the audit rotation and the body budget.

// halfOpen is the attacker of TestHalfOpenFloodFromRefusedUser, run as
// another user: it opens up to N connections to HOST:PORT, each sending
// the start of a request's headers and never the end, and keeps N open
// until its standard input closes (at most HOLD seconds), opening a new
// one for each the server closed (at most 200 every 100 ms, and MAX in
// all). It prints how many it opened at first, then waits, and at the end
// how many it tried. Loopback only.
const halfOpen = `
import select, socket, sys, time, errno
host, port, n, hold, most = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
assert host.startswith("127.")
socks, tries = [], 0
def one():
    global tries
    tries += 1
    try:
        s = socket.create_connection((host, port), timeout=2)
        s.send(b"POST /v1/listservicejobs HTTP/1.1\r\nHost: " + host.encode() + b"\r\n")
        socks.append(s)
    except OSError:
        pass
for _ in range(n):
    one()
print(len(socks), flush=True)
end = time.time() + hold
while time.time() < end:
    if select.select([sys.stdin], [], [], 0.1)[0]:
        break  # the test's requests are done: its end of the pipe closed
    alive = []
    for s in socks:
        try:
            if s.recv(1, socket.MSG_DONTWAIT | socket.MSG_PEEK) == b"":
                s.close(); continue
        except BlockingIOError:
            pass
        except OSError:
            s.close(); continue
        alive.append(s)
    socks = alive
    for _ in range(min(200, n - len(socks))):
        if tries < most:
            one()
print(tries, flush=True)
`

// TestHalfOpenFloodFromRefusedUser: another local user, whom a server
// without --auth refuses, holds thousands of slow connections that never
// finish their headers (3,000 against a server with 2,048 descriptors, as
// 24,000 were against one with the default limit in issue 30), while the
// server's own user sends requests on new connections. None fails, and
// its p99 stays under 2 s: the refused user's connections are reset at
// accept, so they hold no descriptor. Before, they filled every descriptor
// until their header timeout, and accept failed with "too many open files"
// for everyone: the own user's connections waited in the backlog until
// a descriptor came free, up to the 5 s header timeout, or failed. (The
// bound leaves room for a loaded machine: p99 is about 3 ms alone, was
// 66 ms with other packages' tests beside it on 2 cores at load 7 to 18,
// and 1.39 s once in .ci/run's CGO_ENABLED=0 step on the slower kind of
// machine, which failed the 250 ms this bound was before; the broken
// server's waits were the header timeout's.)
func TestHalfOpenFloodFromRefusedUser(t *testing.T) {
	setpriv, u := peer(t, "to run the attacker as a second Unix user and to lower the server's descriptor limit")
	// The system's python3: one under root's home (pyenv) is not the
	// other user's to run.
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("needs /usr/bin/python3 for the attacker")
	}

	// The server gets 2,048 descriptors, hard and soft (Go raises the soft
	// limit to the hard one), from a shell that execs it.
	limited := filepath.Join(t.TempDir(), "qshare-2048")
	must(t, serveproc.WriteExecutable(limited, []byte("#!/bin/sh\nulimit -n 2048 || exit 1\nexec "+bin+" \"$@\"\n")))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: limited, DataDir: filepath.Join(t.TempDir(), "data"),
		Args: []string{"--executor", "simulated", "--log-level", "error"}})
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.Endpoint, "http://"))

	// The attacker holds its connections until the test closes its
	// standard input, when the server's own user is done: it held them
	// for a fixed 8 s before, and the test waited out the 3 s beyond its
	// 5 s of requests. hold bounds it where the test dies first.
	const conns, hold, most = 3000, 60, 20000
	atk := exec.Command(setpriv, "--reuid="+u.Uid, "--regid="+u.Gid, "--clear-groups", python, "-c", halfOpen,
		host, port, strconv.Itoa(conns), strconv.Itoa(hold), strconv.Itoa(most))
	out, err := atk.StdoutPipe()
	must(t, err)
	done, err := atk.StdinPipe()
	must(t, err)
	atk.Stderr = os.Stderr
	must(t, atk.Start())
	t.Cleanup(func() { atk.Process.Kill(); atk.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatal("the attacker printed nothing")
	}
	t.Logf("the refused user opened %s of %d connections", lines.Text(), conns)

	// The server's own user: a request on a new connection each time, for
	// two seconds (five with QSHARE_LONG=1), while the attacker holds its
	// connections. Two are enough to see the broken server: its first
	// request waited for a descriptor, up to the 5 s header timeout, over
	// the bound below. The test runs alone, near the end of the README's
	// command, where its three seconds more were wall time on the slower
	// kind of machine.
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var lat []time.Duration
	failed := 0
	for end := time.Now().Add(longtest.Pick(2*time.Second, 5*time.Second)); time.Now().Before(end); {
		start := time.Now()
		if err := srv.Post(c, "/v1/listschedulingpolicies", "{}"); err != nil {
			failed++
		}
		lat = append(lat, time.Since(start))
		time.Sleep(10 * time.Millisecond)
	}
	done.Close()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	if lines.Scan() {
		t.Logf("the attacker tried %s connections in all", lines.Text())
	}
	t.Logf("the server's own user: %d requests on new connections, p50 %v, p99 %v, %d failed", len(lat), p50, p99, failed)
	if p99 > 2*time.Second || failed > 0 {
		t.Fatalf("p99 %v (want under 2 s) and %d of %d failed, while another user held slow connections", p99, failed, len(lat))
	}
}

// TestRefusalFloodBounded: a client that sends refused requests with 60 KB
// paths on keep-alive connections (issue 30: 101 MiB of audit log and 117
// MB of server log in 3 s) costs a bounded log: each refusal closes its
// connection, the logged path is cut short, and beyond the peer's refusal
// budget its requests are refused unread, counted rather than logged or
// audited one by one.
func TestRefusalFloodBounded(t *testing.T) {
	dir := t.TempDir()
	authFile, audit := filepath.Join(dir, "auth.yaml"), filepath.Join(dir, "audit.log")
	must(t, os.WriteFile(authFile, []byte(authFileText(true)), 0o600))
	var logged atomic.Int64
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args:   []string{"--executor", "simulated", "--auth", authFile, "--audit", audit},
		Output: writerFunc(func(p []byte) (int, error) { logged.Add(int64(len(p))); return len(p), nil })})
	path := "/v1/" + strings.Repeat("a", 60<<10)
	const n = 1000
	codes := map[string]int{}
	closed := 0
	start := time.Now()
	for i := range n {
		req, err := http.NewRequest("GET", srv.Endpoint+path, nil)
		must(t, err)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			codes["error"]++
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.Header.Get("X-Amzn-ErrorType")]++
		if resp.Close {
			closed++
		}
		if i == 0 && (resp.StatusCode != http.StatusForbidden || !resp.Close) {
			t.Fatalf("the first refused request: %s, Connection: close %v; want 403 and the connection closed", resp.Status, resp.Close)
		}
	}
	flood := time.Since(start)
	st, err := os.Stat(audit)
	must(t, err)
	t.Logf("%d refused requests with 60 KB paths in %s: answers %v, %d closed their connection; %d bytes of server log, %d of audit log", n, flood.Round(time.Millisecond), codes, closed, logged.Load(), st.Size())
	if closed != n {
		t.Errorf("%d of %d refusals left the connection open", n-closed, n)
	}
	if codes["TooManyRequestsException"] < n/2 {
		t.Errorf("only %d of %d refusals were beyond the refusal budget (TooManyRequestsException)", codes["TooManyRequestsException"], n)
	}
	// The logs are bounded by the budget (docs/security.md: 50 refusals,
	// refilled at 10 a second), whatever the number of requests and the
	// size of their paths: a line each for the refusals within it, at most
	// 1 KiB (256 bytes of the path and of the reason), and a count line
	// per 10 s for those beyond it. The flood takes some 3 s on an idle
	// machine and 20 s on a loaded one of the slower kind, so the bound
	// is the budget over the flood's time, not a fixed size.
	within := codes["MissingAuthenticationTokenException"]
	if budget := 50 + int(10*flood.Seconds()) + 10; within > budget {
		t.Errorf("%d refusals within the budget in %s: want at most %d (50, and 10 a second)", within, flood.Round(time.Millisecond), budget)
	}
	counts := 2 + int(flood/(10*time.Second))
	if limit := int64(1<<10*(within+counts) + 8<<10); logged.Load() > limit || st.Size() > limit {
		t.Errorf("the flood wrote %d bytes of server log and %d of audit log; want each under %d (1 KiB for each of the %d refusals within the budget and %d count lines, and 8 KiB for the server's start)",
			logged.Load(), st.Size(), limit, within, counts)
	}
	// The refusals beyond the budget are in the audit log too, as a count
	// per peer (at most one line every 10 s), not a line each.
	b, err := os.ReadFile(audit)
	must(t, err)
	lines, counted, countLines := 0, 0, 0
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			Outcome, Peer string
			Count         int
		}
		must(t, json.Unmarshal([]byte(l), &e))
		lines++
		if e.Outcome == "refusals" {
			if e.Peer == "" || e.Count < 1 {
				t.Errorf("a refusals line without its peer or count: %s", l)
			}
			counted += e.Count
			countLines++
		}
	}
	t.Logf("audit: %d lines, of which the refusals lines count %d refusals", lines, counted)
	if counted == 0 {
		t.Errorf("the audit log has no line for the %d refusals beyond the budget", codes["TooManyRequestsException"])
	}
	// Only the refusals within the budget (answered 403) have a line each;
	// the count lines are at most one per 10 s.
	if one := lines - countLines; one != codes["MissingAuthenticationTokenException"] {
		t.Errorf("the audit log has %d lines of single refusals for %d refusals within the budget: the refusals beyond it are audited one by one", one, codes["MissingAuthenticationTokenException"])
	}
	if countLines > counts {
		t.Errorf("%d count lines in %s: want at most one per peer every 10 s", countLines, flood.Round(time.Millisecond))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestAuditRotatesKeepingEveryLine: with --audit-max-mb 1, an audit log
// that grows past 1 MiB is rotated, and every line the server wrote is in
// one of its files, whole, and made durable.
func TestAuditRotatesKeepingEveryLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	authFile, audit := filepath.Join(dir, "auth.yaml"), filepath.Join(dir, "audit.log")
	must(t, os.WriteFile(authFile, []byte(authFileText(true)), 0o600))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "error", "--auth", authFile, "--audit", audit, "--audit-max-mb", "1"}})
	admin := signedClient(srv.Endpoint, adminKey)
	// Each tag request on a queue that does not exist is one audited line
	// (mutating, outcome error) of about 600 bytes.
	arn := "arn:aws:batch:us-east-1:000000000000:job-queue/" + strings.Repeat("q", 200)
	const n = 2500
	var wg sync.WaitGroup
	var sent atomic.Int64
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				_, err := admin.TagResource(context.Background(), &batch.TagResourceInput{ResourceArn: aws.String(arn), Tags: map[string]string{"k": "v"}})
				if err == nil {
					t.Errorf("tagging a queue that does not exist succeeded")
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	files, err := filepath.Glob(audit + "*")
	must(t, err)
	lines := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		must(t, err)
		if len(b) > 1<<20+4<<10 {
			t.Errorf("%s has %d bytes, over the 1 MiB limit by more than a line", f, len(b))
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if l == "" {
				continue
			}
			var e map[string]any
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("%s: a line is not whole JSON: %v: %.100q", f, err, l)
			}
			lines++
		}
	}
	t.Logf("%d requests, %d audit lines in %d files", sent.Load(), lines, len(files))
	if len(files) < 2 {
		t.Errorf("the audit log was not rotated: files %q", files)
	}
	if int64(lines) != sent.Load() {
		t.Errorf("%d audit lines for %d audited requests: rotation lost or added lines", lines, sent.Load())
	}
}

// TestUnauthenticatedBodiesBounded: requests that name a known access key
// with a wrong signature and 1 MiB bodies, sent all at once and never
// finished, do not make the server hold a mebibyte each: bodies are read
// as they arrive, and beyond a budget for all unauthenticated bodies the
// server refuses them (TooManyRequestsException, which the SDKs retry). Before,
// it reserved each announced body, and held all of them.
func TestUnauthenticatedBodiesBounded(t *testing.T) {
	srv := startWithAuth(t)
	addr := strings.TrimPrefix(srv.Endpoint, "http://")
	before := rss(t, srv.Pid())
	const conns, size = 160, 1 << 20
	body := make([]byte, size-1) // never the last byte
	now := time.Now().UTC()
	answers := make(chan string, conns)
	var wg sync.WaitGroup
	var held []net.Conn
	var mu sync.Mutex
	for range conns {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			fmt.Fprintf(c, "POST /v1/listservicejobs HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nX-Amz-Date: %s\r\n"+
				"Authorization: AWS4-HMAC-SHA256 Credential=%s/%s/us-east-1/batch/aws4_request, SignedHeaders=host;x-amz-date, Signature=%s\r\n\r\n",
				addr, size, now.Format("20060102T150405Z"), aliceKey[0], now.Format("20060102"), strings.Repeat("0", 64))
			// The body goes in pieces while the answer is read, so that an
			// answer before the end of the body is seen.
			answered := make(chan string, 1)
			go func() {
				c.SetReadDeadline(time.Now().Add(20 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					answered <- "no answer: " + err.Error()
					return
				}
				answered <- resp.Header.Get("X-Amzn-ErrorType")
			}()
			c.SetWriteDeadline(time.Now().Add(20 * time.Second))
			for off := 0; off < len(body); off += 64 << 10 {
				if _, err := c.Write(body[off:min(off+64<<10, len(body))]); err != nil {
					break
				}
			}
			select {
			case a := <-answered:
				answers <- a
			case <-time.After(2 * time.Second):
				answers <- "held"
			}
		})
	}
	wg.Wait()
	after := rss(t, srv.Pid())
	close(answers)
	got := map[string]int{}
	for a := range answers {
		got[a]++
	}
	t.Logf("%d unsigned 1 MiB bodies held unfinished: server RSS %d MiB -> %d MiB; answers %v", conns, before>>20, after>>20, got)
	for _, c := range held {
		c.Close()
	}
	if after-before > 100<<20 {
		t.Errorf("the server's memory grew by %d MiB for %d unauthenticated bodies; want about the budget (64 MiB)", (after-before)>>20, conns)
	}
	if got["held"] > 64 || got["TooManyRequestsException"] < conns-64 {
		t.Errorf("answers %v: want at most 64 bodies held (the 64 MiB budget) and the others refused with TooManyRequestsException", got)
	}
}

// rss returns the resident memory of process pid, in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Skip("needs /proc to read the server's memory")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// TestEncodedPathNeedsSignature: with --auth, a path whose decoded form
// starts with /ui/, the dashboard's public prefix, but cleans to the
// Batch API (/ui%2F..%2Fv1/listservicejobs) is refused: the guard, the
// router and the handler read one path. It once skipped the signature
// check and reached the API.
func TestEncodedPathNeedsSignature(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	srv := startWithAuth(t)
	for _, p := range []string{"/ui%2F..%2Fv1/listservicejobs", "/ui/%2E%2E/v1/listservicejobs", "/ui/..%2Fv1/listschedulingpolicies"} {
		resp, err := http.Post(srv.Endpoint+p, "application/json", strings.NewReader(`{"jobQueue":"q"}`))
		must(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "not in canonical form") {
			t.Errorf("POST %s unsigned: %s %.200q, want 400: not in canonical form", p, resp.Status, b)
		}
	}
}
