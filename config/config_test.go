package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/engine"
)

func parseExample(t *testing.T) *File {
	t.Helper()
	data, err := os.ReadFile("../examples/three-shares.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("three-shares.yaml", data, Options{})
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return f
}

func TestParseExample(t *testing.T) {
	f := parseExample(t)
	got := f.Engine()
	want := engine.Config{
		Environments: []engine.EnvironmentConfig{{Name: "gpu-pool", Limits: qshare.Capacity{"ml.g5.xlarge": 3}}},
		Queues:       []engine.QueueConfig{{Name: "training", Environment: "gpu-pool"}},
		Shares: []engine.ShareConfig{
			{Queue: "training", Name: "QS1", Limits: qshare.Capacity{"ml.g5.xlarge": 1}, Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: 200, InSharePreemption: true},
			{Queue: "training", Name: "QS2", Limits: qshare.Capacity{"ml.g5.xlarge": 1}, Strategy: qshare.StrategyLend, BorrowLimit: -1},
			{Queue: "training", Name: "QS3", Limits: qshare.Capacity{"ml.g5.xlarge": 1}, Strategy: qshare.StrategyReserve, BorrowLimit: -1},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Engine():\n got %+v\nwant %+v", got, want)
	}
}

func TestParseJSONAndARNReferences(t *testing.T) {
	doc := `{
  "serviceEnvironments": [{"serviceEnvironmentName": "se", "capacityLimits": [{"capacityUnit": "ml.p4d.24xlarge", "maxCapacity": 8}]}],
  "schedulingPolicies": [{"name": "qm", "quotaSharePolicy": {"idleResourceAssignmentStrategy": "FIFO"}}],
  "jobQueues": [{"jobQueueName": "q", "priority": 1,
    "schedulingPolicy": "arn:aws:batch:us-west-2:123456789012:scheduling-policy/qm",
    "serviceEnvironment": "arn:aws:batch:us-west-2:123456789012:service-environment/se",
    "quotaShares": [{"quotaShareName": "a", "capacityLimits": [{"capacityUnit": "ml.p4d.24xlarge", "maxCapacity": 4}],
      "resourceSharingConfiguration": {"strategy": "LEND_AND_BORROW"},
      "preemptionConfiguration": {"inSharePreemption": "DISABLED"}, "tags": {"team": "x"}}]}]
}`
	f, err := Parse("c.json", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ec := f.Engine()
	if len(ec.Queues) != 1 || ec.Queues[0].Environment != "se" || ec.Shares[0].BorrowLimit != -1 {
		t.Fatalf("Engine(): %+v", ec)
	}
}

// TestParseErrors checks that every problem is reported at once, each with
// its line and its field path.
func TestParseErrors(t *testing.T) {
	doc := `serviceEnvironments:
  - serviceEnvironmentName: gpu pool
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 3}]
  - serviceEnvironmentName: other
    capacityLimits: []
schedulingPolicies:
  - name: qm
    quotaSharePolicy: {idleResourceAssignmentStrategy: LIFO}
jobQueues:
  - jobQueueName: training
    schedulingPolicy: qm
    serviceEnvironment: nowhere
    quotaShares:
      - quotaShareName: QS1
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND, borrowLimit: 200}
        preemptionConfiguration: {inSharePreemption: ENABLED}
      - quotaShareName: QS1
        capacityLimits:
          - {capacityUnit: ml.g5.xlarge, maxCapacity: 0}
        resourceSharingConfiguration: {strategy: SHARE}
        preemptionConfiguration: {}
      - quotaShareName: QS3
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: -2}
        preemptionConfiguration: {inSharePreemption: ENABLED}
`
	_, err := Parse("bad.yaml", []byte(doc), Options{})
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want *Errors, got %v", err)
	}
	if qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Fatalf("code %q, want EINVALID", qshare.ErrorCodeOf(err))
	}
	want := []struct {
		line int
		path string
		text string
	}{
		{2, "serviceEnvironments[0].serviceEnvironmentName", "is not valid"},
		{5, "serviceEnvironments[1].capacityLimits", "is required"},
		{8, "schedulingPolicies[0].quotaSharePolicy.idleResourceAssignmentStrategy", "use FIFO"},
		{10, "jobQueues[0].priority", "is required"},
		{12, "jobQueues[0].serviceEnvironment", "names no service environment"},
		{16, "jobQueues[0].quotaShares[0].resourceSharingConfiguration.borrowLimit", "only allowed with strategy LEND_AND_BORROW"},
		{18, "jobQueues[0].quotaShares[1].quotaShareName", "already declared"},
		{20, "jobQueues[0].quotaShares[1].capacityLimits[0].maxCapacity", "at least 1"},
		{21, "jobQueues[0].quotaShares[1].resourceSharingConfiguration.strategy", "not valid"},
		{22, "jobQueues[0].quotaShares[1].preemptionConfiguration.inSharePreemption", "is required"},
		{25, "jobQueues[0].quotaShares[2].resourceSharingConfiguration.borrowLimit", "-2 is not valid"},
	}
	if len(errs.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(errs.Problems), len(want), err)
	}
	for i, w := range want {
		p := errs.Problems[i]
		if p.Pos.Line != w.line || p.Path != w.path || !strings.Contains(p.Message, w.text) {
			t.Errorf("problem %d = line %d %s %q; want line %d %s ...%q...", i, p.Pos.Line, p.Path, p.Message, w.line, w.path, w.text)
		}
	}
	if !strings.Contains(err.Error(), "line 20: jobQueues[0].quotaShares[1].capacityLimits[0].maxCapacity 0 is not valid") {
		t.Errorf("message does not show line and path:\n%v", err)
	}
}

func TestParseShapeErrors(t *testing.T) {
	doc := `serviceEnvironments:
  - serviceEnvironmentName: se
    capacityLimit: [{capacityUnit: ml.g5.xlarge, maxCapacity: 3}]
schedulingPolicies: {name: qm}
jobQueues:
  - jobQueueName: q
    priority: high
    serviceEnvironment: se
    quotaShares:
      - quotaShareName: [a]
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1.5}]
        preemptionConfiguration: {inSharePreemption: ENABLED}
        preemptionConfiguration: {inSharePreemption: ENABLED}
extra: 1
`
	_, err := Parse("shape.yaml", []byte(doc), Options{})
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want *Errors, got %v", err)
	}
	want := []string{
		`line 3: serviceEnvironments[0]: unknown key "capacityLimit" (did you mean "capacityLimits"?)`,
		`line 4: schedulingPolicies must be a list`,
		`line 7: jobQueues[0].priority must be an integer, not "high"`,
		`line 10: jobQueues[0].quotaShares[0].quotaShareName must be a string, not a list`,
		`line 11: jobQueues[0].quotaShares[0].capacityLimits[0].maxCapacity must be an integer, not 1.5`,
		`line 13: jobQueues[0].quotaShares[0].preemptionConfiguration is given more than once`,
		`line 14: the top level: unknown key "extra"`,
	}
	if len(errs.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(errs.Problems), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs.Problems[i].String(), w) {
			t.Errorf("problem %d = %q, want prefix %q", i, errs.Problems[i].String(), w)
		}
	}
}

func TestParseLimits(t *testing.T) {
	base := parseExample(t)
	// Too many shares for the default limit, fine with a raised one.
	many := base.Clone()
	q := &many.JobQueues[0]
	for i := 0; i < 20; i++ {
		s := q.QuotaShares[1]
		s.Name = "extra" + string(rune('a'+i))
		q.QuotaShares = append(q.QuotaShares, s)
	}
	if err := many.Validate(Options{}); err == nil || !strings.Contains(err.Error(), "23 quota shares: at most 20") {
		t.Fatalf("want share-count error, got %v", err)
	}
	if err := many.Validate(Options{MaxSharesPerQueue: 100}); err != nil {
		t.Fatalf("with MaxSharesPerQueue 100: %v", err)
	}
	// Six capacity limits.
	six := base.Clone()
	for i := 0; i < 5; i++ {
		six.JobQueues[0].QuotaShares[0].CapacityLimits = append(six.JobQueues[0].QuotaShares[0].CapacityLimits,
			qshare.CapacityLimit{CapacityUnit: "ml.t" + string(rune('a'+i)), MaxCapacity: 1})
	}
	if err := six.Validate(Options{}); err == nil || !strings.Contains(err.Error(), "at most 5") {
		t.Fatalf("want capacity-limit count error, got %v", err)
	}
	// A 129-character name.
	long := base.Clone()
	long.JobQueues[0].QuotaShares[0].Name = strings.Repeat("a", 129)
	if err := long.Validate(Options{}); err == nil || !strings.Contains(err.Error(), "1 to 128") {
		t.Fatalf("want name error, got %v", err)
	}
	// An unknown policy, unless external references are allowed.
	ext := base.Clone()
	ext.JobQueues[0].SchedulingPolicy = "arn:aws:batch:us-east-1:1:scheduling-policy/elsewhere"
	if err := ext.Validate(Options{}); err == nil || !strings.Contains(err.Error(), "names no scheduling policy") {
		t.Fatalf("want reference error, got %v", err)
	}
	if err := ext.Validate(Options{AllowExternalReferences: true}); err != nil {
		t.Fatalf("external reference allowed: %v", err)
	}
	bad := base.Clone()
	bad.JobQueues[0].ServiceEnvironment = "arn:aws:batch:us-east-1:1:job-queue/gpu-pool"
	if err := bad.Validate(Options{}); err == nil || !strings.Contains(err.Error(), "is not a service-environment ARN") {
		t.Fatalf("want ARN kind error, got %v", err)
	}
	// Two quota-share queues on one environment.
	two := base.Clone()
	q2 := two.JobQueues[0]
	q2.Name = "second"
	two.JobQueues = append(two.JobQueues, q2)
	if err := two.Validate(Options{}); err == nil || !strings.Contains(err.Error(), "already serves jobQueues[0]") {
		t.Fatalf("want one-queue-per-environment error, got %v", err)
	}
}

func TestParseNotYAML(t *testing.T) {
	for _, doc := range []string{"", "a: [", "- 1\n- 2\n"} {
		_, err := Parse("x", []byte(doc), Options{})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Errorf("Parse(%q) = %v, want an invalid-input error", doc, err)
		}
	}
}

func TestWhatIf(t *testing.T) {
	base := parseExample(t)
	f, err := base.WhatIf([]string{
		"share.QS1.strategy=RESERVE",
		"share.training/QS2.maxCapacity.ml.g5.xlarge=4",
		"share.QS2.maxCapacity.ml.p4d.24xlarge=2",
		"env.gpu-pool.maxCapacity.ml.g5.xlarge=120",
		"share.QS3.inSharePreemption=ENABLED",
		"queue.training.priority=7",
	}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s1 := f.JobQueues[0].Share("QS1")
	if s1.Strategy != qshare.StrategyReserve || s1.BorrowLimit != nil {
		t.Errorf("QS1 = %+v: strategy RESERVE without borrowLimit expected", s1)
	}
	if got := qshare.Limits(f.JobQueues[0].Share("QS2").CapacityLimits); !reflect.DeepEqual(got, qshare.Capacity{"ml.g5.xlarge": 4, "ml.p4d.24xlarge": 2}) {
		t.Errorf("QS2 limits %v", got)
	}
	if f.ServiceEnvironments[0].CapacityLimits[0].MaxCapacity != 120 || *f.JobQueues[0].Priority != 7 {
		t.Errorf("env or queue not changed: %+v %d", f.ServiceEnvironments[0], *f.JobQueues[0].Priority)
	}
	// The base is untouched.
	if base.JobQueues[0].Share("QS1").Strategy != qshare.StrategyLendAndBorrow || base.ServiceEnvironments[0].CapacityLimits[0].MaxCapacity != 3 {
		t.Error("WhatIf changed its receiver")
	}
	d := Describe(base, f)
	wantDiff := []string{
		"env gpu-pool maxCapacity ml.g5.xlarge: 3 -> 120",
		"queue training priority: 1 -> 7",
		"share training/QS1 strategy: LEND_AND_BORROW -> RESERVE",
		"share training/QS1 borrowLimit: 200 -> -1",
		"share training/QS2 maxCapacity ml.g5.xlarge: 1 -> 4",
		"share training/QS2 maxCapacity ml.p4d.24xlarge: 0 -> 2",
		"share training/QS3 inSharePreemption: DISABLED -> ENABLED",
	}
	if !reflect.DeepEqual(d, wantDiff) {
		t.Errorf("Describe:\n got %q\nwant %q", d, wantDiff)
	}

	for _, tc := range []struct{ kv, want string }{
		{"share.QS9.strategy=LEND", `no quota share "QS9" (known: training/QS1, training/QS2, training/QS3)`},
		{"share.QS1.strategy=SOMETIMES", `--what-if share.QS1.strategy=SOMETIMES: jobQueues[0].quotaShares[0].resourceSharingConfiguration.strategy "SOMETIMES" is not valid`},
		{"share.QS2.borrowLimit=10", "only allowed with strategy LEND_AND_BORROW"},
		{"share.QS1.maxCapacity.ml.g5.xlarge=0", "capacityLimits is required"},
		{"env.nope.state=DISABLED", `no service environment "nope"`},
		{"share.QS1", "is not KEY=VALUE"},
		{"pool.x.y=1", "must start with env., share., queue. or plan."},
		{"share.QS1.colour=red", `unknown field "colour"`},
		{"share.QS1.borrowLimit=lots", `"lots" is not an integer`},
	} {
		_, err := base.WhatIf([]string{tc.kv}, Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WhatIf(%q) = %v, want ...%q...", tc.kv, err, tc.want)
		}
	}
}

// TestMinRunTime: a quota share's minimum run time comes from its tag
// qshare:minRunTimeSeconds, in the apply file as through the API; a bad
// value is a problem at the tag; --what-if sets it per share or for all.
func TestMinRunTime(t *testing.T) {
	doc := `serviceEnvironments:
  - serviceEnvironmentName: pool
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
schedulingPolicies:
  - name: qm
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: q
    priority: 1
    schedulingPolicy: qm
    serviceEnvironment: pool
    quotaShares:
      - quotaShareName: a
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND}
        preemptionConfiguration: {inSharePreemption: DISABLED}
        tags: {qshare:minRunTimeSeconds: "600"}
      - quotaShareName: b
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND_AND_BORROW}
        preemptionConfiguration: {inSharePreemption: ENABLED}
`
	f, err := Parse("c.yaml", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	minRuns := func(f *File) []time.Duration {
		var out []time.Duration
		for _, s := range f.Engine().Shares {
			out = append(out, s.MinRunTime)
		}
		return out
	}
	if got := minRuns(f); !reflect.DeepEqual(got, []time.Duration{10 * time.Minute, 0}) {
		t.Fatalf("minimum run times %v; want [10m 0s]", got)
	}
	bad := strings.Replace(doc, `"600"`, `"ten minutes"`, 1)
	if _, err := Parse("c.yaml", []byte(bad), Options{}); err == nil || !strings.Contains(err.Error(), "jobQueues[0].quotaShares[0].tags") || !strings.Contains(err.Error(), qshare.TagMinRunTime) {
		t.Fatalf("bad minimum run time: %v; want a problem at the share's tags naming %s", err, qshare.TagMinRunTime)
	}

	all, err := f.WhatIf([]string{"share.*.minRunTime=10m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := minRuns(all); !reflect.DeepEqual(got, []time.Duration{10 * time.Minute, 10 * time.Minute}) {
		t.Fatalf("share.*.minRunTime=10m: %v", got)
	}
	if d := Describe(f, all); !reflect.DeepEqual(d, []string{"share q/b minRunTime: 0s -> 10m0s"}) {
		t.Errorf("Describe: %q", d)
	}
	one, err := f.WhatIf([]string{"share.q/a.minRunTime=0", "share.b.minRunTime=90"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := minRuns(one); !reflect.DeepEqual(got, []time.Duration{0, 90 * time.Second}) {
		t.Fatalf("per share: %v", got)
	}
	if got := minRuns(f); !reflect.DeepEqual(got, []time.Duration{10 * time.Minute, 0}) {
		t.Fatalf("WhatIf changed its receiver: %v", got)
	}
	for _, kv := range []string{"share.a.minRunTime=-1m", "share.a.minRunTime=1.5s", "share.a.minRunTime=169h", "share.a.minRunTime=604801", "share.a.minRunTime=soon"} {
		if _, err := f.WhatIf([]string{kv}, Options{}); err == nil || !strings.Contains(err.Error(), "minRunTime") {
			t.Errorf("WhatIf(%q) = %v; want a problem naming minRunTime", kv, err)
		}
	}
}

// TestCapacityPlans: capacityPlans parse into the engine's plans (named by
// their training-plan ARN); bad plans are problems with their line and
// path.
func TestCapacityPlans(t *testing.T) {
	data, err := os.ReadFile("../examples/three-shares.yaml")
	if err != nil {
		t.Fatal(err)
	}
	plans := `capacityPlans:
  - capacityPlanName: p5
    jobQueue: training
    quotaShareName: QS1
    instanceType: ml.p5.48xlarge
    instanceCount: 16
    startTime: 2026-12-01T00:00:00Z
    endTime: 2026-12-15T00:00:00Z
`
	f, err := Parse("f.yaml", append(append([]byte{}, data...), plans...), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := f.Engine()
	want := engine.PlanConfig{Name: "arn:aws:sagemaker:us-east-1:000000000000:training-plan/p5", Label: "p5", Queue: "training", Share: "QS1",
		InstanceType: "ml.p5.48xlarge", Count: 16, Start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC),
		Warning: 10 * time.Minute}
	if len(c.Plans) != 1 || !reflect.DeepEqual(c.Plans[0], want) {
		t.Fatalf("plans %+v, want %+v", c.Plans, want)
	}
	if g := f.Clone(); !reflect.DeepEqual(g.CapacityPlans, f.CapacityPlans) {
		t.Fatal("Clone loses the plans")
	}
	n := strings.Count(string(data), "\n")
	for _, bad := range []struct{ from, to, path, text string }{
		{"startTime: 2026-12-01T00:00:00Z", "startTime: tomorrow", "capacityPlans[0].startTime", "not an RFC 3339 time"},
		{"QS1", "QS9", "capacityPlans[0].quotaShareName", "names no quota share"},
		{"jobQueue: training", "jobQueue: other", "capacityPlans[0].jobQueue", "names no job queue"},
		{"instanceCount: 16", "instanceCount: 0", "capacityPlans[0].instanceCount", "instanceCount 0 is not valid"},
		{"endTime: 2026-12-15T00:00:00Z", "endTime: 2026-11-15T00:00:00Z", "capacityPlans[0].endTime", "must be after startTime"},
		{"instanceType: ml.p5.48xlarge", "instanceTyp: ml.p5.48xlarge", "capacityPlans[0].instanceTyp", `did you mean "instanceType"`},
	} {
		_, err := Parse("f.yaml", append(append([]byte{}, data...), strings.Replace(plans, bad.from, bad.to, 1)...), Options{})
		var errs *Errors
		if !errors.As(err, &errs) || len(errs.Problems) == 0 {
			t.Fatalf("%s → %s: %v; want problems", bad.from, bad.to, err)
		}
		p := errs.Problems[0]
		if p.Path != bad.path || !strings.Contains(p.Message, bad.text) || p.Pos.Line <= n {
			t.Errorf("%s → %s: line %d %s %q; want a line after %d, %s ...%q...", bad.from, bad.to, p.Pos.Line, p.Path, p.Message, n, bad.path, bad.text)
		}
	}
}

// TestWhatIfPlan: --what-if plan.NAME=... adds, replaces and removes a
// capacity plan, for the only share or the one named; a bad value says
// how to write it.
func TestWhatIfPlan(t *testing.T) {
	f := parseExample(t)
	g, err := f.WhatIf([]string{"plan.big=ml.g5.xlarge:16@2026-12-01T00:00/14d:share=QS1:warning=5m"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := int64(300)
	want := qshare.CapacityPlan{Name: "big", JobQueue: "training", QuotaShare: "QS1", InstanceType: "ml.g5.xlarge", InstanceCount: 16,
		StartTime: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), EndTime: time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC), WarningSeconds: &w}
	if len(g.CapacityPlans) != 1 || !reflect.DeepEqual(g.CapacityPlans[0], want) || len(f.CapacityPlans) != 0 {
		t.Fatalf("plans %+v (the original has %d)", g.CapacityPlans, len(f.CapacityPlans))
	}
	if d := Describe(f, g); len(d) != 1 || d[0] != "plan big: 16 ml.g5.xlarge for training/QS1 from 2026-12-01T00:00:00Z to 2026-12-15T00:00:00Z (warning 5m0s)" {
		t.Fatalf("Describe: %q", d)
	}
	h, err := g.WhatIf([]string{"plan.big=none"}, Options{})
	if err != nil || len(h.CapacityPlans) != 0 {
		t.Fatalf("plan.big=none: %v, %+v", err, h)
	}
	for _, bad := range []struct{ kv, want string }{
		{"plan.big=ml.g5.xlarge:16", "TYPE:COUNT@START/LENGTH"},
		{"plan.big=ml.g5.xlarge:many@2026-12-01/14d:share=QS1", "not an integer"},
		{"plan.big=ml.g5.xlarge:2@tomorrow/14d:share=QS1", "is not a time"},
		{"plan.big=ml.g5.xlarge:2@2026-12-01/two weeks:share=QS1", "not a duration"},
		{"plan.big=ml.g5.xlarge:2@2026-12-01/14d", "say which share"},
		{"plan.big=ml.g5.xlarge:2@2026-12-01/14d:share=QS9", "QS9"},
		{"plan.big=ml.g5.xlarge:0@2026-12-01/14d:share=QS1", "instanceCount"},
		{"plan.big=ml.g5.xlarge:2@2026-12-01/14d:share=QS1:warning=15d", "warningSeconds"},
		{"plan.no/pe=ml.g5.xlarge:2@2026-12-01/14d:share=QS1", "plan.NAME"},
		{"plan.big=none", "no capacity plan big"},
	} {
		if _, err := f.WhatIf([]string{bad.kv}, Options{}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v; want an error saying %q", bad.kv, err, bad.want)
		}
	}
}

// TestParseExecutor: an environment's `executor: NAME` is its tag
// qshare:executor, and a tags entry that names another is a problem.
func TestParseExecutor(t *testing.T) {
	const doc = `serviceEnvironments:
  - serviceEnvironmentName: hpc
    executor: slurm-a
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 4}]
`
	f, err := Parse("exec.yaml", []byte(doc), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ServiceEnvironments[0].Executor; got != "slurm-a" {
		t.Fatalf("executor = %q, want slurm-a", got)
	}
	const clash = `serviceEnvironments:
  - serviceEnvironmentName: hpc
    tags: {"qshare:executor": other}
    executor: slurm-a
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 4}]
`
	_, err = Parse("exec.yaml", []byte(clash), Options{})
	if err == nil || !strings.Contains(err.Error(), "line 4") || !strings.Contains(err.Error(), `the tags name executor "other"`) {
		t.Fatalf("clash: got %v, want a problem at line 4 naming the tag's executor", err)
	}
	_, err = Parse("exec.yaml", []byte(strings.Replace(doc, "slurm-a", `""`, 1)), Options{})
	if err == nil || !strings.Contains(err.Error(), "executor is empty") {
		t.Fatalf("empty: got %v", err)
	}
}
