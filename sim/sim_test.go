package sim

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"qshare/config"
	"qshare/config/configtest"
	"qshare/event"
	goldenfile "qshare/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

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

// runSmall replays examples/three-shares-trace.csv on the spec's three-share example and
// returns the report and the event log as bytes.
func runSmall(t *testing.T, opts Options) (*Report, []byte, []byte) {
	cfg := configtest.Load(t, "../examples/three-shares.yaml")
	jobs := loadTrace(t, cfg, "../examples/three-shares-trace.csv")
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
	goldenfile.Check(t, "sim", name, got, *update)
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
	cfg := configtest.Load(t, "../examples/three-shares.yaml")
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

// checkEvents checks an event log of a large run against cfg: each
// violation, up to ten, is a test error. It returns the log's summary.
func checkEvents(t *testing.T, cfg *config.File, events io.Reader) event.Summary {
	t.Helper()
	vs, sum, err := event.Check(cfg, events, event.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vs {
		if i == 10 {
			t.Errorf("... %d violations in all", len(vs))
			break
		}
		t.Errorf("violation: %v", v)
	}
	return sum
}

func runChecked(t *testing.T, cfg *config.File, jobs []Job, opts Options, settle float64) *Report {
	t.Helper()
	var events bytes.Buffer
	opts.Events = &events
	opts.verify = true
	rep, err := Run(context.Background(), cfg, jobs, opts)
	if err != nil {
		t.Fatal(err)
	}
	vs, _, err := event.Check(cfg, bytes.NewReader(events.Bytes()), event.CheckOptions{Settle: settle, Origin: opts.Start})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		t.Errorf("violation: %v\n%s", v, events.String())
	}
	return rep
}

func TestGraceAndFinalPreemption(t *testing.T) {
	cfg := configtest.Load(t, "../examples/three-shares.yaml")
	csv := `job_id,submit_s,duration_s,quota_share,instance_type,instance_count,priority,preemption_retries
a_own,0,100,QS1,ml.g5.xlarge,1,0,
borrower,0,100,QS1,ml.g5.xlarge,1,0,0
short,1,3,QS1,ml.g5.xlarge,1,0,
lender,10,20,QS2,ml.g5.xlarge,1,0,
`
	jobs, _, err := ReadTrace(strings.NewReader(csv), cfg, TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep := runChecked(t, cfg, jobs, Options{Grace: 5 * time.Second, Outcomes: true}, 0)
	// borrower is reclaimed at 10 for lender, stops at 15 and fails (no
	// retries); lender starts at 15 and ends at 35.
	if rep.Jobs.Failed != 1 || rep.Preemptions.CrossShare != 1 || rep.Jobs.Completed != 3 {
		t.Errorf("report %+v", rep.Jobs)
	}
	byID := map[string]JobOutcome{}
	for _, o := range rep.Outcomes {
		byID[o.ID] = o
	}
	if o := byID["lender"]; o.FirstStart != 15*time.Second || o.End != 35*time.Second {
		t.Errorf("lender %+v: want start 15s, end 35s", o)
	}
	if o := byID["borrower"]; o.Completed || o.End != 15*time.Second || o.Preemptions != 1 {
		t.Errorf("borrower %+v", o)
	}
	// 15 s of work lost by one instance.
	if rep.WorkLostInstS != 15 {
		t.Errorf("work lost %v, want 15", rep.WorkLostInstS)
	}
}

func TestDisabledShareRejects(t *testing.T) {
	base := configtest.Load(t, "../examples/three-shares.yaml")
	cfg, err := base.WhatIf([]string{"share.QS3.state=DISABLED"}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	jobs := loadTrace(t, cfg, "../examples/three-shares-trace.csv")
	rep := runChecked(t, cfg, jobs, Options{}, 0)
	for _, s := range rep.Shares {
		if s.Share == "QS3" && (s.Failed != 3 || s.Completed != 0 || s.UsedInstS != 0) {
			t.Errorf("QS3 %+v: its three jobs should be rejected", s)
		}
	}
}

func TestDisabledQueueRejects(t *testing.T) {
	base := configtest.Load(t, "../examples/three-shares.yaml")
	cfg, err := base.WhatIf([]string{"queue.training.state=DISABLED"}, config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := runChecked(t, cfg, loadTrace(t, cfg, "../examples/three-shares-trace.csv"), Options{}, 0)
	if rep.Jobs.Failed != 9 || rep.Jobs.Completed != 0 {
		t.Errorf("jobs %+v: every job should be rejected", rep.Jobs)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	w := KueueBaseline()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, w.Config, w.Jobs, Options{}); err != context.Canceled {
		t.Fatalf("Run with a cancelled context: %v", err)
	}
}

func TestCheckpointsKeepWork(t *testing.T) {
	w := KueueBaseline()
	plain, err := Run(context.Background(), w.Config, append([]Job(nil), w.Jobs...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ckpt, err := Run(context.Background(), w.Config, append([]Job(nil), w.Jobs...), Options{CheckpointInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Preemptions.InShare == 0 || ckpt.WorkLostInstS >= plain.WorkLostInstS {
		t.Errorf("checkpoints should lose less work: %v (plain, %d in-share preemptions) vs %v", plain.WorkLostInstS, plain.Preemptions.InShare, ckpt.WorkLostInstS)
	}
}

// TestMinRunTimeWakesTheSimulator: a borrower protected by its share's
// minimum run time is reclaimed at the instant the protection ends (the
// simulator runs the pass the engine asks for, engine.NextWake), not at the
// next event; and the what-if share.NAME.minRunTime sets it.
func TestMinRunTimeWakesTheSimulator(t *testing.T) {
	base := configtest.Load(t, "../examples/three-shares.yaml")
	csv := `job_id,submit_s,duration_s,quota_share,instance_type,instance_count,priority,preemption_retries
own,0,1000,QS1,ml.g5.xlarge,1,0,
borrower,0,1000,QS1,ml.g5.xlarge,1,0,
lender,100,20,QS2,ml.g5.xlarge,1,0,
`
	for _, tc := range []struct {
		whatIf      string
		lenderStart time.Duration
		lost        float64
	}{
		{"share.QS1.minRunTime=0", 100 * time.Second, 100},
		{"share.QS1.minRunTime=10m", 600 * time.Second, 600},
		{"share.*.minRunTime=2000", 1000 * time.Second, 0}, // protected until it finishes
	} {
		cfg, err := base.WhatIf([]string{tc.whatIf}, config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		jobs, _, err := ReadTrace(strings.NewReader(csv), cfg, TraceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rep := runChecked(t, cfg, jobs, Options{Outcomes: true}, 0)
		for _, o := range rep.Outcomes {
			if o.ID == "lender" && o.FirstStart != tc.lenderStart {
				t.Errorf("%s: lender starts at %s, want %s", tc.whatIf, o.FirstStart, tc.lenderStart)
			}
		}
		if rep.WorkLostInstS != tc.lost {
			t.Errorf("%s: work lost %v instance-s, want %v", tc.whatIf, rep.WorkLostInstS, tc.lost)
		}
	}
}
