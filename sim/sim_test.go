package sim

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"qshare/config"
	"qshare/event"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func loadConfig(t testing.TB, path string) *config.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(path, data, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func loadTrace(t testing.TB, cfg *config.File, path string) []Job {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	jobs, _, err := ReadTrace(f, cfg, TraceOptions{Name: path})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// runSmall replays testdata/small.csv on the spec's three-share example and
// returns the report and the event log as bytes.
func runSmall(t *testing.T, opts Options) (*Report, []byte, []byte) {
	cfg := loadConfig(t, "../examples/three-shares.yaml")
	jobs := loadTrace(t, cfg, "testdata/small.csv")
	var events, report bytes.Buffer
	opts.Events = &events
	opts.verify = true
	rep, err := Run(context.Background(), cfg, jobs, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&report); err != nil {
		t.Fatal(err)
	}
	return rep, report.Bytes(), events.Bytes()
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./sim -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test ./sim -update rewrites it after a deliberate change):\n%s", name, got)
	}
}

func TestGoldenSmallTrace(t *testing.T) {
	rep, report, events := runSmall(t, Options{CheckpointInterval: 20e9})
	golden(t, "small.report.json", report)
	golden(t, "small.events.jsonl", events)
	var summary bytes.Buffer
	rep.WriteSummary(&summary)
	golden(t, "small.summary.txt", summary.Bytes())

	// The same inputs give the same bytes.
	_, report2, events2 := runSmall(t, Options{CheckpointInterval: 20e9})
	if !bytes.Equal(report, report2) || !bytes.Equal(events, events2) {
		t.Fatal("two runs of the same inputs differ")
	}

	// The engine kept its guarantees, as far as the events show.
	cfg := loadConfig(t, "../examples/three-shares.yaml")
	vs, sum, err := event.Check(cfg, bytes.NewReader(events), event.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("violation: %v", v)
	}
	if sum.Preempts == 0 || sum.Starts == 0 {
		t.Errorf("the small trace should exercise preemption: %+v", sum)
	}
}
