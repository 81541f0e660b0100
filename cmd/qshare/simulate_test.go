package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"qshare/internal/serveproc"
)

// TestSimulateAndCheckEvents runs the real binary: simulate writes a report,
// an event log and plots; check-events finds the log clean and exits 1 on
// a log that breaks a guarantee.
func TestSimulateAndCheckEvents(t *testing.T) {
	t.Parallel() // a directory and a binary of its own, mostly waiting on them; with the package's other long tests
	bin, err := serveproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Dir = "../.."
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	// clean runs check-events and fails unless it finds no violation.
	clean := func(what string, args ...string) {
		t.Helper()
		out, errOut, err := run(append([]string{"check-events"}, args...)...)
		if err != nil || !strings.Contains(out, ": 0 violations") {
			t.Fatalf("%s: %v\n%s%s", what, err, out, errOut)
		}
	}
	// violated runs check-events and fails unless it exits with status 1
	// and prints each of wants; it returns what it printed.
	violated := func(what string, wants []string, args ...string) string {
		t.Helper()
		out, errOut, err := run(append([]string{"check-events"}, args...)...)
		ee, ok := err.(*exec.ExitError)
		ok = ok && ee.ExitCode() == 1
		for _, w := range wants {
			ok = ok && strings.Contains(out, w)
		}
		if !ok {
			t.Fatalf("%s: %v, want exit status 1 and %q\n%s%s", what, err, wants, out, errOut)
		}
		return out
	}
	report, events, plots := filepath.Join(dir, "r.json"), filepath.Join(dir, "e.jsonl"), filepath.Join(dir, "plots")

	out, errOut, err := run("simulate", "--config", "examples/three-shares.yaml", "--trace", "examples/three-shares-trace.csv",
		"--report", report, "--events", events, "--plots", plots, "--checkpoint-interval", "20s")
	if err != nil {
		t.Fatalf("simulate: %v\n%s%s", err, out, errOut)
	}
	if !strings.Contains(out, "training/QS1  LEND_AND_BORROW") || !strings.Contains(out, "preemptions: 2 cross-share, 1 in-share") {
		t.Errorf("summary:\n%s", out)
	}
	want, _ := os.ReadFile("../../sim/testdata/small.report.json")
	if got, _ := os.ReadFile(report); !bytes.Equal(got, want) {
		t.Errorf("the report differs from sim/testdata/small.report.json:\n%s", got)
	}
	for _, p := range []string{"capacity.svg", "waits.svg", "preemptions.svg", "index.html"} {
		if fi, err := os.Stat(filepath.Join(plots, p)); err != nil || fi.Size() == 0 {
			t.Errorf("plot %s: %v", p, err)
		}
	}

	clean("check-events on a clean log", events, "--config", "examples/three-shares.yaml")

	// Make QS3's job start on top of everything: the environment is full.
	bad := filepath.Join(dir, "bad.jsonl")
	data, _ := os.ReadFile(events)
	data = append(data, []byte(`{"t":100,"job":"qs3_big","event":"start","share":"QS3","queue":"training","instance_type":"ml.g5.xlarge","instances":2,"priority":0}`+"\n")...)
	os.WriteFile(bad, data, 0o644)
	out = violated("check-events on a bad log", nil, bad, "--config", "examples/three-shares.yaml", "-o", "json")
	var res struct {
		Violations []struct {
			Rule string
			Jobs []string
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Violations) == 0 || res.Violations[0].Jobs[0] != "qs3_big" {
		t.Errorf("json output: %v\n%s", err, out)
	}

	// A line in the middle that cannot be read is a finding with its line
	// number; the lines after it are still checked (and here break a rule).
	lines := strings.SplitAfter(string(data), "\n")
	garbled := strings.Join(lines[:3], "") + "{\"t\":1,\"job\n" + strings.Join(lines[3:], "")
	os.WriteFile(bad, []byte(garbled), 0o644)
	violated("check-events on a log with an unreadable line", []string{"(line 4) [log] line 4 cannot be read", "qs3_big starts"},
		bad, "--config", "examples/three-shares.yaml")

	// The configuration a server holds, instead of the file.
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: t.TempDir(), Args: []string{"--executor", "simulated", "--log-level", "warn"}})
	if out, errOut, err := run("apply", "-f", "examples/three-shares.yaml", "--endpoint", srv.Endpoint); err != nil {
		t.Fatalf("apply: %v\n%s%s", err, out, errOut)
	}
	clean("check-events --endpoint on a clean log", events, "--endpoint", srv.Endpoint)
	violated("check-events --endpoint on a bad log", []string{"[share-limit] job qs3_big starts"}, bad, "--endpoint", srv.Endpoint)

	// A minimum run time on QS1 (qshare:minRunTimeSeconds): the simulation
	// honours it and its log is clean under the same change, in a file
	// or at a server tagged through apply; the log made without it breaks
	// the min-run-time rule there.
	minEvents := filepath.Join(dir, "min.jsonl")
	if out, errOut, err := run("simulate", "--config", "examples/three-shares.yaml", "--trace", "examples/three-shares-trace.csv",
		"--what-if", "share.QS1.minRunTime=10m", "--events", minEvents); err != nil {
		t.Fatalf("simulate with a minimum run time: %v\n%s%s", err, out, errOut)
	}
	clean("check-events --what-if on the log of the same change", minEvents, "--config", "examples/three-shares.yaml", "--what-if", "share.QS1.minRunTime=600")
	cfgData, _ := os.ReadFile("../../examples/three-shares.yaml")
	tagged := strings.Replace(string(cfgData), "preemptionConfiguration: {inSharePreemption: ENABLED}",
		"preemptionConfiguration: {inSharePreemption: ENABLED}\n        tags: {qshare:minRunTimeSeconds: \"600\"}", 1)
	taggedPath := filepath.Join(dir, "tagged.yaml")
	os.WriteFile(taggedPath, []byte(tagged), 0o644)
	if out, errOut, err := run("apply", "-f", taggedPath, "--endpoint", srv.Endpoint); err != nil {
		t.Fatalf("apply with the tag: %v\n%s%s", err, out, errOut)
	}
	clean("check-events --endpoint (tagged) on the log with the minimum", minEvents, "--endpoint", srv.Endpoint)
	violated("check-events --endpoint (tagged) on the log without the minimum", []string{"[min-run-time]"}, events, "--endpoint", srv.Endpoint)

	// --what-if with --compare.
	out, errOut, err = run("simulate", "--config", "examples/three-shares.yaml", "--trace", "examples/three-shares-trace.csv",
		"--what-if", "share.QS1.strategy=RESERVE", "--compare", "--report", report)
	if err != nil || !strings.Contains(out, "share training/QS1 strategy: LEND_AND_BORROW -> RESERVE") {
		t.Fatalf("compare: %v\n%s%s", err, out, errOut)
	}
	var cmp struct {
		WhatIf json.RawMessage `json:"what_if"`
	}
	if data, _ := os.ReadFile(report); json.Unmarshal(data, &cmp) != nil || len(cmp.WhatIf) == 0 {
		t.Errorf("comparison report: %s", data)
	}

	// Errors: a bad configuration, a bad trace.
	badCfg := filepath.Join(dir, "bad.yaml")
	os.WriteFile(badCfg, []byte("serviceEnvironments:\n  - serviceEnvironmentName: x\n    capacityLimits: [{capacityUnit: t, maxCapacity: 0}]\n"), 0o644)
	_, errOut, err = run("simulate", "--config", badCfg, "--trace", "examples/three-shares-trace.csv")
	if err == nil || !strings.Contains(errOut, "line 3: serviceEnvironments[0].capacityLimits[0].maxCapacity 0 is not valid") {
		t.Errorf("bad config: %v\n%s", err, errOut)
	}
	badTrace := filepath.Join(dir, "bad.csv")
	os.WriteFile(badTrace, []byte("job_id,submit_s,duration_s,quota_share,instance_type,instance_count\nj,0,1,QS7,ml.g5.xlarge,1\nk,0,1,QS1,ml.g5.xlarge,1\n"), 0o644)
	_, errOut, err = run("simulate", "--config", "examples/three-shares.yaml", "--trace", badTrace)
	if err == nil || !strings.Contains(errOut, `line 2: quota_share "QS7" is not a share of queue training`) {
		t.Errorf("bad trace: %v\n%s", err, errOut)
	}
	out, errOut, err = run("simulate", "--config", "examples/three-shares.yaml", "--trace", badTrace, "--skip-bad-rows")
	if err != nil || !strings.Contains(errOut, "skipped 1 bad rows") || !strings.Contains(out, "jobs: 1 submitted, 1 completed") {
		t.Errorf("--skip-bad-rows: %v\n%s%s", err, out, errOut)
	}
}
