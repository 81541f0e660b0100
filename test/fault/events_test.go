package fault

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/event"
	"qshare/internal/soak"
)

// TestEventLogReconciles kills the server, then removes the last batch of
// its event log as if its append had been lost with the process (and leaves
// half a line, as a crash in the middle of a write would). On
// restart the server must repair the log from the store: the torn line is
// dropped, the lost transitions are appended, no job holds capacity twice,
// and check-events is clean at the end.
func TestEventLogReconciles(t *testing.T) {
	parallelBinary(t)
	root := t.TempDir()
	data := filepath.Join(root, "data")
	traces := filepath.Join(root, "traces")
	os.MkdirAll(traces, 0o755)
	events := filepath.Join(root, "events.jsonl")
	srv := startServer(t, data, "--events", events)
	applyConfig(t, srv.Endpoint, soak.FleetConfig(2))
	w := soak.NewWorkload(traces, 2)
	c := client(srv.Endpoint)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 20; i++ {
		w.Submit(ctx, c, r)
	}
	time.Sleep(1500 * time.Millisecond)
	srv.Kill()

	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
	// A crash loses at most the batch being appended: the trailing lines
	// with the last line's time (one commit's events share it).
	lastT := func(l string) string { return strings.SplitN(strings.TrimPrefix(l, `{"t":`), ",", 2)[0] }
	cut := 0
	for cut < len(lines)-1 && lastT(lines[len(lines)-1-cut]) == lastT(lines[len(lines)-1]) {
		cut++
	}
	kept := strings.Join(lines[:len(lines)-cut], "")
	if !strings.HasSuffix(kept, "\n") {
		kept += "\n"
	}
	torn := `{"t":1795000000.5,"job":"half-writ`
	if err := os.WriteFile(events, []byte(kept+torn), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("removed the last batch (%d of %d lines) and left a torn line", cut, len(lines))

	srv = startServer(t, data, "--events", events)
	c = client(srv.Endpoint)
	if err := w.CheckAcked(ctx, c); err != nil {
		t.Fatal(err)
	}
	all, err := soak.WaitAllDone(ctx, c, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// check-events reads the configuration from the running server too.
	out, err := runQshare(t, "check-events", events, "--endpoint", srv.Endpoint, "--settle", "1")
	if err != nil {
		t.Errorf("check-events --endpoint: %v\n%s", err, out)
	} else {
		t.Logf("check-events --endpoint: %s", strings.TrimSpace(out))
	}
	srv.Stop()
	after, _ := os.ReadFile(events)
	if bytes.Contains(after, []byte("half-writ")) {
		t.Error("the torn line is still in the log")
	}
	if !bytes.Contains(after, []byte("reconciled with the store")) && cut > 0 {
		t.Log("no reconciliation lines: the removed lines were all re-derived by later commits")
	}
	res, err := checkEventsCLI(t, events, writeTemp(t, soak.FleetConfig(2)))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("event log: %s", v)
	}
	if t.Failed() {
		t.Logf("the log:\n%s", after)
	}
	n := 0
	f, _ := os.Open(events)
	defer f.Close()
	rd := event.NewReader(f)
	for {
		e, err := rd.Read()
		if err != nil {
			break
		}
		if strings.Contains(e.Reason, "reconciled with the store") {
			n++
		}
	}
	t.Logf("%d jobs; %d reconciliation lines; %d lines checked, %d violations", len(all), n, res.Summary.Lines, res.Summary.Violations)
}
