package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch"

	"qshare/internal/longtest"
)

// probe sends well-formed requests while a misbehaving client does its
// worst, and reports their latencies; every one must be answered.
type probe struct {
	t    *testing.T
	c    *batch.Client
	mu   sync.Mutex
	lat  []time.Duration
	errs []error
	stop chan struct{}
	done chan struct{}
}

func startProbe(t *testing.T, c *batch.Client) *probe {
	p := &probe{t: t, c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			t0 := time.Now()
			_, err := p.c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}})
			cancel()
			p.mu.Lock()
			p.lat = append(p.lat, time.Since(t0))
			if err != nil {
				p.errs = append(p.errs, err)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// end stops the probe, fails the test on an unanswered request, and
// returns a summary of the latencies.
func (p *probe) end(what string) string {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, err := range p.errs {
		if i < 3 {
			p.t.Errorf("%s: a well-formed request failed: %v", what, err)
		}
	}
	if len(p.lat) == 0 {
		return "no requests"
	}
	sort.Slice(p.lat, func(a, b int) bool { return p.lat[a] < p.lat[b] })
	return fmt.Sprintf("%d well-formed requests answered, median %s, max %s", len(p.lat), p.lat[len(p.lat)/2].Round(100*time.Microsecond), p.lat[len(p.lat)-1].Round(100*time.Microsecond))
}

// TestMisbehavingClients holds stalled and idle connections, sends bodies
// over the limits and bodies with the wrong content type, while a probe
// checks that well-formed requests keep being answered.
func TestMisbehavingClients(t *testing.T) {
	parallelBinary(t)
	root := t.TempDir()
	srv := startServer(t, filepath.Join(root, "data"))
	applyConfig(t, srv.Endpoint, oneShareConfig(1))
	c := client(srv.Endpoint)
	u, _ := url.Parse(srv.Endpoint)
	addr := u.Host

	t.Run("StalledConnections", func(t *testing.T) {
		p := startProbe(t, c)
		const n = 200
		conns := make([]net.Conn, 0, n)
		for i := 0; i < n; i++ {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			// Half a request: the headers never end.
			fmt.Fprintf(conn, "POST /v1/describejobqueues HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n", addr)
			conns = append(conns, conn)
		}
		time.Sleep(time.Second)
		t.Log("200 stalled connections: " + p.end("stalled"))
		// The server gives up on them (ReadHeaderTimeout, 10s).
		closed := 0
		deadline := time.Now().Add(20 * time.Second)
		for _, conn := range conns {
			conn.SetReadDeadline(deadline)
			if _, err := io.ReadAll(conn); err == nil {
				closed++
			}
			conn.Close()
		}
		if closed != n {
			t.Errorf("the server closed %d of %d stalled connections within 20s", closed, n)
		}
	})

	t.Run("TricklingBody", func(t *testing.T) {
		longtest.Only(t, "it waits for the server's 30 s read timeout; in the README's command StalledConnections checks the header timeout")
		p := startProbe(t, c)
		var conns []net.Conn
		for i := 0; i < 50; i++ {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			// Whole headers, then 10 bytes of a 1000-byte body, then nothing.
			fmt.Fprintf(conn, "POST /v1/describejobqueues HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"jobQueue", addr)
			conns = append(conns, conn)
		}
		start := time.Now()
		closed := 0
		for _, conn := range conns {
			conn.SetReadDeadline(start.Add(45 * time.Second))
			if _, err := io.ReadAll(conn); err == nil {
				closed++
			}
			conn.Close()
		}
		t.Logf("50 trickling bodies: %d closed by the server after %s; %s", closed, time.Since(start).Round(time.Second), p.end("trickling"))
		if closed != len(conns) {
			t.Errorf("the server closed %d of %d connections whose body never came within 45s", closed, len(conns))
		}
	})

	t.Run("OversizedBodies", func(t *testing.T) {
		p := startProbe(t, c)
		for _, tc := range []struct {
			op   string
			size int
		}{{"createserviceenvironment", 2 << 20}, {"submitservicejob", 64 << 10}, {"describejobqueues", 8 << 20}} {
			body := `{"x":"` + strings.Repeat("a", tc.size) + `"}`
			status, typ, msg := post(t, srv.Endpoint+"/v1/"+tc.op, "application/json", body)
			if status != http.StatusBadRequest || typ != "ClientException" || msg == "" {
				t.Errorf("%s with a %d-byte body: %d %s %q, want a 400 ClientException", tc.op, len(body), status, typ, msg)
			} else {
				t.Logf("%s, %d bytes: %d %s: %s", tc.op, len(body), status, typ, msg)
			}
		}
		t.Log("oversized bodies: " + p.end("oversized"))
	})

	t.Run("WrongContentType", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", ""} {
			for _, body := range []string{`{"jobQueues":["q"]}`, `jobQueues=q`, `<jobQueues>q</jobQueues>`} {
				// Refused before the body is read (issue 14: a browser can send
				// these cross-site without a preflight).
				status, typ, msg := post(t, srv.Endpoint+"/v1/describejobqueues", ct, body)
				if status != http.StatusBadRequest || typ != "ClientException" || !strings.Contains(msg, "Content-Type must be application/json") {
					t.Errorf("Content-Type %q, body %q: %d %s %q, want a 400 ClientException about the Content-Type", ct, body, status, typ, msg)
				}
			}
		}
	})

	t.Run("ThousandsOfConnections", func(t *testing.T) {
		p := startProbe(t, c)
		const idle, busy = 2000, 500
		var conns []net.Conn
		for i := 0; i < idle; i++ {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, conn)
		}
		defer func() {
			for _, conn := range conns {
				conn.Close()
			}
		}()
		// And many clients at once, each on its own connection.
		var wg sync.WaitGroup
		var mu sync.Mutex
		failed := 0
		for i := 0; i < busy; i++ {
			wg.Go(func() {
				hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
				if err := srv.Post(hc, "/v1/describejobqueues", `{"jobQueues":["q"]}`); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if failed > 0 {
			t.Errorf("%d of %d concurrent requests failed while %d connections were open", failed, busy, idle)
		}
		t.Logf("%d idle connections + %d concurrent requests (%d failed): %s", idle, busy, failed, p.end("thousands"))
	})
}

// post sends a raw request and returns the status and the error's type and message.
func post(t *testing.T, url, contentType, body string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Type, e.Message
}
