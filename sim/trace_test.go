package sim

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/config/configtest"
)

func TestReadTraceColumnsAnyOrder(t *testing.T) {
	cfg := configtest.Load(t, "../examples/three-shares.yaml")
	csv := "\ufeffinstance_count,quota_share,note,job_id,duration_s,submit_s,instance_type,priority,preemption_retries,job_queue\n" +
		"2,QS1,x,b,10,5.5,ml.g5.xlarge,7,0,training\n" +
		"1,QS2,,a,1.25,0,ml.g5.xlarge,,,\n" +
		"1,QS1,,b,10,5.5,ml.p4d.24xlarge,7,0,training\n"
	jobs, bad, err := ReadTrace(strings.NewReader(csv), cfg, TraceOptions{Name: "t.csv"})
	if err != nil || len(bad) != 0 {
		t.Fatalf("ReadTrace: %v %v", err, bad)
	}
	want := []Job{
		{ID: "a", Submit: 0, Duration: 1250 * time.Millisecond, Queue: "training", Share: "QS2", Demand: qshare.Capacity{"ml.g5.xlarge": 1}, PreemptionRetries: -1},
		{ID: "b", Submit: 5500 * time.Millisecond, Duration: 10 * time.Second, Queue: "training", Share: "QS1", Priority: 7,
			Demand: qshare.Capacity{"ml.g5.xlarge": 2, "ml.p4d.24xlarge": 1}, PreemptionRetries: 0},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Fatalf("got %+v\nwant %+v", jobs, want)
	}
}

func TestReadTraceBadRows(t *testing.T) {
	cfg := configtest.Load(t, "../examples/three-shares.yaml")
	csv := `job_id,submit_s,duration_s,quota_share,instance_type,instance_count,priority
ok1,0,10,QS1,ml.g5.xlarge,1,0
,0,10,QS1,ml.g5.xlarge,1,0
bad2,-1,x,QS1,ml.g5.xlarge,1,0
bad3,0,10,QS9,ml.g5.xlarge,1,0
bad4,0,10,QS1,,0,10000
ok2,3,10,QS2,ml.g5.xlarge,1,0
ok1,1,10,QS1,ml.p4d.24xlarge,1,0
`
	_, bad, err := ReadTrace(strings.NewReader(csv), cfg, TraceOptions{Name: "t.csv"})
	var te *TraceError
	if !errors.As(err, &te) || qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Fatalf("want a *TraceError, got %v", err)
	}
	wantLines := []int{3, 4, 5, 6, 8}
	var lines []int
	for _, r := range bad {
		lines = append(lines, r.Line)
	}
	if !reflect.DeepEqual(lines, wantLines) {
		t.Fatalf("bad lines %v, want %v:\n%v", lines, wantLines, err)
	}
	for _, frag := range []string{
		"line 3: job_id is empty",
		`line 4: submit_s "-1" is not a number of seconds of 0 or more; duration_s "x"`,
		`line 5: quota_share "QS9" is not a share of queue training`,
		`line 6: instance_type is empty; instance_count "0" is not a whole number of at least 1; priority "10000"`,
		`line 8: job_id "ok1" is repeated with different fields`,
		"--skip-bad-rows",
	} {
		if !strings.Contains(err.Error(), frag) {
			t.Errorf("error lacks %q:\n%v", frag, err)
		}
	}
	jobs, bad, err := ReadTrace(strings.NewReader(csv), cfg, TraceOptions{Name: "t.csv", SkipBadRows: true})
	if err != nil || len(bad) != 5 || len(jobs) != 2 || jobs[0].ID != "ok1" || jobs[1].ID != "ok2" {
		t.Fatalf("skip bad rows: %v %v %+v", err, bad, jobs)
	}
	if _, _, err := ReadTrace(strings.NewReader("job_id,submit_s\n"), cfg, TraceOptions{Name: "t.csv"}); err == nil ||
		!strings.Contains(err.Error(), "lacks column(s) duration_s, quota_share, instance_type, instance_count") {
		t.Errorf("missing columns: %v", err)
	}
}

func TestReadPhilly(t *testing.T) {
	cfg := configtest.Load(t, "../examples/philly/philly.yaml")
	csv := "job_id,submit_s,gpus,duration_s,vc\n1,0,1,100,6214e9\n2,5,16,50,unknown\n3,6,12,7,ee9e8c\n4,7,2,1,nowhere\n5,8,1,1,ed69ec\n"
	jobs, bad, err := ReadPhilly(strings.NewReader(csv), cfg, PhillyOptions{TraceOptions: TraceOptions{SkipBadRows: true}, NodeType: "ml.p4d.24xlarge", Exclude: []string{"ed69ec"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || bad[0].Line != 5 || !strings.Contains(bad[0].Message, `quota_share "nowhere"`) {
		t.Errorf("bad rows %v", bad)
	}
	want := []qshare.Capacity{{"ml.g5.xlarge": 1}, {"ml.p4d.24xlarge": 2}, {"ml.p4d.24xlarge": 1, "ml.g5.xlarge": 4}}
	if len(jobs) != 3 {
		t.Fatalf("jobs %+v", jobs)
	}
	for i, j := range jobs {
		if !reflect.DeepEqual(j.Demand, want[i]) || j.Queue != "philly" {
			t.Errorf("job %s: demand %v queue %s, want %v", j.ID, j.Demand, j.Queue, want[i])
		}
	}
	jobs, _, _ = ReadPhilly(strings.NewReader(csv), cfg, PhillyOptions{TraceOptions: TraceOptions{SkipBadRows: true}})
	if !reflect.DeepEqual(jobs[1].Demand, qshare.Capacity{"ml.g5.xlarge": 16}) {
		t.Errorf("GPU mapping: %v", jobs[1].Demand)
	}
}
