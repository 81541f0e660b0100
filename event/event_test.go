package event

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"qshare"
	"qshare/config"
	"qshare/config/configtest"
)

func TestAppendRoundTrip(t *testing.T) {
	for _, e := range []Event{
		{T: 0, Job: "j1", Event: Submit, Share: "QS1", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 2, Priority: 3},
		{T: 1234.5678, Job: "a\"b\\c\n\t\x01é", Event: Preempt, Share: "s", Queue: "q", InstanceType: "t", Instances: 1,
			Priority: 9999, Reason: "preempted by cross-share preemption <&>", For: "j2"},
		{T: 1.7e9 + 0.125, Job: "x", Event: Fail, Instances: 0},
	} {
		b := Append(nil, e)
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Errorf("round trip of %s:\n got %+v\nwant %+v", b, back, e)
		}
	}
	if got := string(Append(nil, Event{T: 2, Job: "\xff", Event: Start})); !strings.Contains(got, `"job":"\ufffd"`) {
		t.Errorf("invalid UTF-8 not replaced: %s", got)
	}
}

func TestWriterReader(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	in := Lines(Event{T: 1, Job: "j", Event: Start, Share: "s", Queue: "q", Priority: 1},
		qshare.Capacity{"ml.p4d.24xlarge": 2, "ml.g5.xlarge": 3})
	for _, e := range in {
		if err := w.Write(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	buf.WriteString("\n   \n")
	out, err := ReadAll(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) || in[0].InstanceType != "ml.g5.xlarge" || in[1].Instances != 2 {
		t.Fatalf("got %+v, want %+v", out, in)
	}
	for _, bad := range []string{`{"t":1,"job":"j","event":"explode"}`, `{"t":1,"event":"start"}`, `not json`} {
		_, err := NewReader(strings.NewReader("\n" + bad + "\n")).Read()
		if err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
			t.Errorf("Read(%q) = %v, want an error on line 2", bad, err)
		}
	}
}

const threeShares = "../examples/three-shares.yaml"

func inlineConfig(t *testing.T, envCap int, shares ...string) *config.File {
	t.Helper()
	cfg, err := config.Parse("inline", []byte(inlineDoc(envCap, shares...)), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// inlineDoc is the configuration file of inlineConfig.
func inlineDoc(envCap int, shares ...string) string {
	doc := `serviceEnvironments:
  - serviceEnvironmentName: env
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: ` + strconv.Itoa(envCap) + `}]
schedulingPolicies: [{name: qm, quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}}]
jobQueues:
  - jobQueueName: training
    priority: 1
    schedulingPolicy: qm
    serviceEnvironment: env
    quotaShares:
`
	for _, s := range shares {
		// NAME LIMIT STRATEGY [BORROW] [minrun=SECONDS]
		f := strings.Fields(s)
		tags := ""
		if n := len(f); strings.HasPrefix(f[n-1], "minrun=") {
			tags = `, tags: {qshare:minRunTimeSeconds: "` + strings.TrimPrefix(f[n-1], "minrun=") + `"}`
			f = f[:n-1]
		}
		doc += "      - {quotaShareName: " + f[0] + ", capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: " + f[1] +
			"}], preemptionConfiguration: {inSharePreemption: ENABLED}" + tags + ", resourceSharingConfiguration: {strategy: " + f[2]
		if len(f) > 3 {
			doc += ", borrowLimit: " + f[3]
		}
		doc += "}}\n"
	}
	return doc
}

// parseLog reads the tests' shorthand: "T JOB EVENT SHARE INSTANCES PRIORITY [FOR] [plan=NAME]",
// one event a line, queue "training", instance type ml.g5.xlarge (or TYPE=N,TYPE=N
// in the INSTANCES column for several types).
func parseLog(t *testing.T, log string) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		tm, _ := strconv.ParseFloat(f[0], 64)
		prio, _ := strconv.Atoi(f[5])
		e := Event{T: tm, Job: f[1], Event: Kind(f[2]), Share: f[3], Queue: "training", Priority: prio}
		if e.Share == "-" {
			e.Share = "" // a job of a queue without quota shares
		}
		if e.Event == Lead {
			e.Job, e.Queue = "", "" // a server's takeover names no job: "T - lead - 0 0"
		}
		for _, x := range f[6:] {
			if name, ok := strings.CutPrefix(x, "plan="); ok {
				e.Plan = config.PlanARN(name)
			} else {
				e.For = x
			}
		}
		demand := qshare.Capacity{}
		if n, err := strconv.ParseInt(f[4], 10, 64); err == nil {
			if n > 0 {
				demand["ml.g5.xlarge"] = n
			}
		} else {
			for _, kv := range strings.Split(f[4], ",") {
				k, v, _ := strings.Cut(kv, "=")
				n, _ := strconv.ParseInt(v, 10, 64)
				demand[k] = n
			}
		}
		for _, x := range Lines(e, demand) {
			w.Write(x)
		}
	}
	w.Flush()
	return buf.Bytes()
}

func rulesOf(vs []Violation) []string {
	seen := map[string]bool{}
	for _, v := range vs {
		seen[v.Rule] = true
	}
	var out []string
	for r := range seen {
		out = append(out, r)
	}
	sort.Strings(out)
	return out
}

// The worked example of the spec, played to the end: clean.
const workedExample = `
0 high submit QS1 1 3
0 med submit QS1 1 2
0 low submit QS1 1 1
0 high start QS1 1 3
0 med start QS1 1 2
10 q2 submit QS2 1 1
10 med preempt QS1 1 2 q2
10 q2 start QS2 1 1
20 low priority QS1 1 4
20 high preempt QS1 1 3 low
20 low start QS1 1 4
30 low finish QS1 1 4
30 high start QS1 1 3
40 q2 finish QS2 1 1
40 med start QS1 1 2
50 high finish QS1 1 3
50 med finish QS1 1 2
`

func TestCheckCleanLogs(t *testing.T) {
	cfg := configtest.Load(t, threeShares)
	for name, log := range map[string]string{
		"worked example": workedExample,
		"reserve share runs alone": `
0 r1 submit QS3 1 0
0 r1 start QS3 1 0
0 a submit QS1 1 0
0 a start QS1 1 0
0 b submit QS1 1 0
0 b start QS1 1 0
5 r1 finish QS3 1 0
5 a finish QS1 1 0
5 b finish QS1 1 0`,
		"a misconfigured head waits without blocking others": `
0 big submit QS2 2 5
0 x submit QS1 1 0
0 x start QS1 1 0
3 x finish QS1 1 0
3 big fail QS2 0 5`,
		"a reclaiming job waits for its victim, not on RESERVE room": `
0 high submit QS1 1 3
0 med submit QS1 1 2
0 high start QS1 1 3
0 med start QS1 1 2
10 q2 submit QS2 1 1
15 med preempt QS1 1 2 q2
15 q2 start QS2 1 1
20 q2 finish QS2 1 1
20 med start QS1 1 2
30 med finish QS1 1 2
30 high finish QS1 1 3`,
		"final preemption": `
0 a submit QS1 1 0
0 a start QS1 1 0
0 b submit QS1 1 0
0 b start QS1 1 0
1 c submit QS2 1 0
1 b preempt QS1 1 0 c
1 b fail QS1 0 0
1 c start QS2 1 0
2 c finish QS2 1 0
2 a finish QS1 1 0`,
	} {
		vs, sum, err := Check(cfg, bytes.NewReader(parseLog(t, log)), CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 0 {
			t.Errorf("%s: want no violation, got:\n%v", name, vs)
		}
		if sum.Violations != 0 || sum.Starts == 0 {
			t.Errorf("%s: summary %+v", name, sum)
		}
	}
}

func TestCheckMultiTypeJob(t *testing.T) {
	doc := `serviceEnvironments:
  - serviceEnvironmentName: env
    capacityLimits: [{capacityUnit: a, maxCapacity: 2}, {capacityUnit: b, maxCapacity: 2}]
schedulingPolicies: [{name: qm, quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}}]
jobQueues:
  - {jobQueueName: training, priority: 1, schedulingPolicy: qm, serviceEnvironment: env, quotaShares: [
      {quotaShareName: S, capacityLimits: [{capacityUnit: a, maxCapacity: 2}, {capacityUnit: b, maxCapacity: 2}],
       resourceSharingConfiguration: {strategy: LEND}, preemptionConfiguration: {inSharePreemption: DISABLED}}]}
`
	cfg, err := config.Parse("multi", []byte(doc), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clean := `
0 j submit S a=2,b=1 0
0 j start S a=2,b=1 0
0 k submit S a=1,b=1 0
4 j finish S a=2,b=1 0
4 k start S a=1,b=1 0
5 k finish S a=1,b=1 0`
	if vs, _, _ := Check(cfg, bytes.NewReader(parseLog(t, clean)), CheckOptions{}); len(vs) != 0 {
		t.Fatalf("clean multi-type log: %v", vs)
	}
	// k fits at t=0 as far as type b goes, but not type a: no violation
	// there; a partial give-back is one.
	bad := `
0 j submit S a=2,b=1 0
0 j start S a=2,b=1 0
4 j finish S a=2 0`
	vs, _, _ := Check(cfg, bytes.NewReader(parseLog(t, bad)), CheckOptions{})
	if got := rulesOf(vs); !reflect.DeepEqual(got, []string{RuleLog}) {
		t.Fatalf("partial give-back: rules %v: %v", got, vs)
	}
}

// TestCheckCatchesEachRule feeds one hand-written log per guarantee, each
// breaking it, and checks that exactly that rule is reported.
func TestCheckCatchesEachRule(t *testing.T) {
	three := configtest.Load(t, threeShares)
	for _, tc := range []struct {
		name  string
		cfg   *config.File
		log   string
		rules []string
		jobs  []string
	}{
		{"environment capacity", inlineConfig(t, 2, "A 2 LEND", "B 2 LEND"), `
0 a1 submit A 2 0
0 a1 start A 2 0
0 b1 submit B 1 0
0 b1 start B 1 0`, []string{RuleEnvironmentCapacity}, []string{"b1", "a1"}},
		{"LEND share above its own limit", three, `
0 x submit QS2 1 0
0 y submit QS2 1 0
0 x start QS2 1 0
0 y start QS2 1 0`, []string{RuleShareLimit}, []string{"y"}},
		{"borrow cap", inlineConfig(t, 4, "A 1 LEND_AND_BORROW 100", "B 3 LEND"), `
0 a1 submit A 1 0
0 a2 submit A 1 0
0 a3 submit A 1 0
0 a1 start A 1 0
0 a2 start A 1 0
0 a3 start A 1 0`, []string{RuleBorrowCap}, []string{"a3"}},
		{"RESERVE capacity used by a borrower", three, `
0 h submit QS1 1 3
0 m submit QS1 1 2
0 l submit QS1 1 1
0 h start QS1 1 3
0 m start QS1 1 2
0 l start QS1 1 1`, []string{RuleBorrowSource}, []string{"l"}},
		{"victim before its share's minimum run time", inlineConfig(t, 2, "A 1 LEND", "B 1 LEND_AND_BORROW -1 minrun=600"), `
0 b1 submit B 1 0
0 b2 submit B 1 0
0 b1 start B 1 0
0 b2 start B 1 0
100 a1 submit A 1 0
100 b2 preempt B 1 0 a1
100 a1 start A 1 0`, []string{RuleMinRunTime}, []string{"b2", "a1"}},
		{"in-share victim before its minimum run time, judged at its stopping line", inlineConfig(t, 1, "A 1 LEND minrun=60"), `
0 low submit A 1 0
0 low start A 1 0
30 high submit A 1 5
30 low stopping A 1 0 high
90 low preempt A 1 0 high
90 high start A 1 5`, []string{RuleMinRunTime}, []string{"low", "high"}},
		{"head waits past its victim's protection", inlineConfig(t, 2, "A 1 LEND", "B 1 LEND_AND_BORROW -1 minrun=600"), `
0 b1 submit B 1 0
0 b2 submit B 1 0
0 b1 start B 1 0
0 b2 start B 1 0
100 a1 submit A 1 0
650 b2 preempt B 1 0 a1
650 a1 start A 1 0`, []string{RuleProtectionWait}, []string{"a1", "b1"}},
		{"head waits while it fits", three, `
0 a submit QS2 1 0
5 b submit QS1 1 0
5 b start QS1 1 0`, []string{RuleHeadWaits}, []string{"a"}},
		{"stopping job's capacity is not free, but free capacity is", three, `
0 a submit QS1 1 0
0 a start QS1 1 0
0 b submit QS1 1 0
0 b start QS1 1 0
1 c submit QS2 1 0
2 b preempt QS1 1 0 c
3 c start QS2 1 0`, []string{RuleHeadWaits}, []string{"c"}},
		{"RESERVE job preempted", three, `
0 r submit QS3 1 0
0 r start QS3 1 0
1 x submit QS1 1 0
1 r preempt QS3 1 0 x
1 x start QS1 1 0`, []string{RuleHeadWaits, RuleReclaimVictim, RuleReservePreempted}, []string{"r", "x"}},
		{"in-share preemption of an equal priority", three, `
0 a submit QS1 1 2
0 a start QS1 1 2
0 b submit QS1 1 2
0 c submit QS2 1 0
0 c start QS2 1 0
1 a preempt QS1 1 2 b
1 b start QS1 1 2`, []string{RuleInSharePriority}, []string{"a", "b"}},
		{"reclaim from a share within its own capacity", three, `
0 a submit QS1 1 0
0 a start QS1 1 0
0 b submit QS2 1 0
0 b start QS2 1 0
1 c submit QS2 1 0
1 a preempt QS1 1 0 c
1 c start QS2 1 0`, []string{RuleReclaimVictim, RuleShareLimit}, []string{"a", "c"}},
		{"preempted for a job that never starts", three, `
0 a submit QS1 1 0
0 a start QS1 1 0
0 m submit QS1 1 0
0 m start QS1 1 0
1 b submit QS2 1 0
1 m preempt QS1 1 0 b
1 b fail QS2 0 0`, []string{RulePreemptedForNothing}, []string{"b", "m"}},
		{"preempted for a job still waiting at the end", three, `
0 a submit QS1 1 0
0 a start QS1 1 0
0 m submit QS1 1 0
0 m start QS1 1 0
1 b submit QS2 2 0
1 m preempt QS1 1 0 b`, []string{RulePreemptedForNothing}, []string{"b", "m"}},
		{"holding twice", three, `
0 a submit QS1 1 0
0 a start QS1 1 0
0 b submit QS2 1 0
0 b start QS2 1 0
1 a start QS1 1 0`, []string{RuleDoubleHold}, []string{"a"}},
		{"inconsistent log", three, `
0 a submit QS1 1 0
0 a start QS1 1 0
2 a finish QS1 1 0
1 z submit QS9 1 0
3 a finish QS1 1 0
4 q start QS2 1 0`, []string{RuleLog}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, sum, err := Check(tc.cfg, bytes.NewReader(parseLog(t, tc.log)), CheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := rulesOf(vs); !reflect.DeepEqual(got, tc.rules) {
				t.Fatalf("rules %v, want %v:\n%v", got, tc.rules, vs)
			}
			if sum.Violations != len(vs) {
				t.Errorf("summary counts %d violations, list has %d", sum.Violations, len(vs))
			}
			if tc.jobs != nil {
				found := false
				for _, v := range vs {
					found = found || reflect.DeepEqual(v.Jobs, tc.jobs)
				}
				if !found {
					t.Errorf("no violation names jobs %v: %v", tc.jobs, vs)
				}
			}
			for _, v := range vs {
				if v.Message == "" || !strings.Contains(v.String(), "t=") {
					t.Errorf("violation without time or message: %+v", v)
				}
			}
		})
	}
}

// A server's pass runs a moment after the change that allows it: with
// Settle, a short wait is no violation and a long one is.
func TestCheckSettle(t *testing.T) {
	cfg := configtest.Load(t, threeShares)
	log := `
100.000 a submit QS2 1 0
100.002 a start QS2 1 0
101 b submit QS1 1 0
101.5 x submit QS3 1 0
101.6 x start QS3 1 0
200 b start QS1 1 0`
	vs, _, _ := Check(cfg, bytes.NewReader(parseLog(t, log)), CheckOptions{Settle: 0.5})
	if len(vs) != 1 || vs[0].Rule != RuleHeadWaits || vs[0].Jobs[0] != "b" {
		t.Fatalf("want one head-waits violation for b, got %v", vs)
	}
}

// A lead line (a server took over) starts every head's wait again: b fitted
// from 101 while no server led, and waited 0.7 s in all but only 0.5 s
// after the lead at 101.2, less than the settle at every instant. A head
// that still waits past the settle after the lead line is a violation.
func TestCheckLeadRestartsTheWait(t *testing.T) {
	cfg := configtest.Load(t, threeShares)
	for _, tc := range []struct {
		name, lead, bStart string
		want               int
	}{
		{"no leader before the lead line", "101.2 - lead - 0 0\n", "101.7", 0},
		{"the same wait without a lead line", "", "101.7", 1},
		{"a wait past the settle after the lead line", "101.2 - lead - 0 0\n", "200", 1},
	} {
		log := `100.000 a submit QS2 1 0
100.002 a start QS2 1 0
101 b submit QS1 1 0
` + tc.lead + `101.5 x submit QS3 1 0
101.6 x start QS3 1 0
101.65 x finish QS3 1 0
` + tc.bStart + ` b start QS1 1 0`
		if tc.bStart == "200" {
			// an instant at which b has waited 0.6 s since the lead
			log = strings.Replace(log, "200 b start", "101.8 z submit QS3 1 0\n101.8 z start QS3 1 0\n200 b start", 1)
		}
		vs, _, err := Check(cfg, bytes.NewReader(parseLog(t, log)), CheckOptions{Settle: 0.5})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(vs) != tc.want || tc.want == 1 && (vs[0].Rule != RuleHeadWaits || vs[0].Jobs[0] != "b") {
			t.Errorf("%s: violations %v, want %d head-waits of b", tc.name, vs, tc.want)
		}
	}
}

// checkLog checks a log in the tests' shorthand against cfg.
func checkLog(t *testing.T, cfg *config.File, log string) []Violation {
	t.Helper()
	vs, _, err := Check(cfg, bytes.NewReader(parseLog(t, log)), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// A job that others are preempted for is promised its demand: the engine
// counts it in its share's usage and holds at once the part its stopping
// victims do not hold. A head of the same share that would fit without that
// promise waits, and that is not a head-waits; once the promised job has
// started, the same wait is one.
func TestCheckReservedCapacityIsNotFree(t *testing.T) {
	cfg := inlineConfig(t, 4, "A 3 LEND", "B 1 LEND_AND_BORROW -1")
	const log = `
0 b1 submit B 2 0
0 b1 start B 2 0
0 b2 submit B 1 0
0 b2 start B 1 0
1 a1 submit A 3 0
1 b1 stopping B 2 0 a1
2 a2 submit A 1 5
3 b1 preempt B 2 0 a1
3 a1 start A 3 0
5 a1 finish A 3 0
5 a2 start A 1 5
6 a2 finish A 1 5
6 b2 finish B 1 0
6 b1 start B 2 0
7 b1 finish B 2 0`
	check := func(log string) []Violation { t.Helper(); return checkLog(t, cfg, log) }
	if vs := check(log); len(vs) != 0 {
		t.Fatalf("a head waiting behind a reserved job's promised capacity: %v", vs)
	}
	// Had a1 started at once on other room, a2 would have fitted at t=2.
	started := strings.Replace(log, "1 b1 stopping B 2 0 a1", "1 b1 stopping B 2 0 x", 1)
	if got := rulesOf(check(started)); !slices.Contains(got, RuleHeadWaits) {
		t.Fatalf("without the promise: rules %v, want head-waits among them", got)
	}
}

// A share whose reserved job borrows is above its own limit while its
// started jobs alone are not: the engine counts the promised demand in the
// share's usage, and so may reclaim the share's other jobs for another
// share (found by the simulator's property test: big's reservation made S0
// commit 6 of 2, and x1 was reclaimed for y; the checker counted only x1
// and x2 and reported a reclaim-victim).
func TestCheckReclaimCountsReservedDemand(t *testing.T) {
	cfg := inlineConfig(t, 5, "S0 2 LEND_AND_BORROW -1", "S1 1 LEND")
	const log = `
0 x1 submit S0 1 0
0 x1 start S0 1 0
0 x2 submit S0 1 0
0 x2 start S0 1 0
1 big submit S0 4 1
1 x2 stopping S0 1 0 big
2 y submit S1 1 0
2 x1 stopping S0 1 0 y
3 x2 preempt S0 1 0 big
3 big start S0 4 1
3 x1 preempt S0 1 0 y
3 y start S1 1 0
4 big finish S0 4 1
4 y finish S1 1 0
4 x1 start S0 1 0
4 x2 start S0 1 0
5 x1 finish S0 1 0
5 x2 finish S0 1 0`
	if vs := checkLog(t, cfg, log); len(vs) != 0 {
		t.Fatalf("a victim of a share whose reserved job borrows: %v", vs)
	}
	// Without big's reservation (x2 runs on), S0 uses 2 of 2: x1 is not a
	// victim.
	var plain []string
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, "big") && !strings.Contains(l, "x2 stopping") && !strings.Contains(l, "x2 preempt") && !strings.Contains(l, "4 x2 start") {
			plain = append(plain, l)
		}
	}
	if got := rulesOf(checkLog(t, cfg, strings.Join(plain, "\n"))); !slices.Contains(got, RuleReclaimVictim) {
		t.Fatalf("without the reservation: rules %v, want reclaim-victim among them", got)
	}
}

// A job that others are preempted for may start early, on room freed
// while its victims stop, and even finish before they do: the victims'
// preempt lines then find it started since the decision, not "never
// started".
func TestCheckPreemptedForJobThatFinishedEarly(t *testing.T) {
	cfg := inlineConfig(t, 3, "A 1 RESERVE", "B 1 LEND_AND_BORROW -1")
	const log = `
0 b1 submit B 1 0
0 b1 start B 1 0
0 a1 submit A 1 0
0 a1 start A 1 0
0 b2 submit B 1 0
0 b2 start B 1 0
1 b3 submit B 1 1
1 b1 stopping B 1 0 b3
2 a1 finish A 1 0
2 b2 finish B 1 0
2 b3 start B 1 1
2 b3 finish B 1 1
3 b1 preempt B 1 0 b3
3 b1 start B 1 0
4 b1 finish B 1 0`
	if vs := checkLog(t, cfg, log); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

// A job terminated while its victim stops (TerminateJob, between the
// stopping line and the preempt) leaves the system without starting: the
// victim was taken when the decision was right, and nothing is left for it
// to make room for. A job that leaves after its victim's preempt line
// still breaks preempted-for-nothing (TestCheckCatchesEachRule).
func TestCheckForJobTerminatedWhileVictimStops(t *testing.T) {
	const log = `
0 a submit QS1 1 0
0 a start QS1 1 0
0 m submit QS1 1 0
0 m start QS1 1 0
1 b submit QS2 1 0
1 m stopping QS1 1 0 b
2 b fail QS2 0 0
3 m preempt QS1 1 0 b
3 m start QS1 1 0
4 a finish QS1 1 0
4 m finish QS1 1 0`
	cfg := configtest.Load(t, threeShares)
	if vs := checkLog(t, cfg, log); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
	// A restarted server's preempt may not name it: the same.
	if vs := checkLog(t, cfg, strings.Replace(log, "3 m preempt QS1 1 0 b", "3 m preempt QS1 1 0", 1)); len(vs) != 0 {
		t.Fatalf("without for: violations: %v", vs)
	}
	// A stopping line for a job the log never had is the log's fault, once;
	// its preempt adds nothing.
	unknown := strings.ReplaceAll(strings.NewReplacer("1 b submit QS2 1 0\n", "", "2 b fail QS2 0 0\n", "").Replace(log), "0 b", "0 zz")
	if got := rulesOf(checkLog(t, cfg, unknown)); !reflect.DeepEqual(got, []string{RuleLog}) {
		t.Fatalf("stopping for an unknown job: rules %v, want only %s", got, RuleLog)
	}
}

// A preemption under a stop grace is decided while the victim's share is
// above its own limit, and given back when the share may be within it
// again. The stopping line is where it is judged.
func TestCheckPreemptionJudgedWhenDecided(t *testing.T) {
	cfg := inlineConfig(t, 4, "A 2 LEND_AND_BORROW 100", "B 2 LEND_AND_BORROW 100")
	const before = `
0 a1 submit A 1 0
0 a2 submit A 1 0
0 a3 submit A 1 0
0 b1 submit B 1 0
0 a1 start A 1 0
0 a2 start A 1 0
0 a3 start A 1 0
0 b1 start B 1 0
1 b2 submit B 1 0`
	const after = `
2 a1 finish A 1 0
2 b2 start B 1 0
3 a3 preempt A 1 0 b2
3 a3 start A 1 0
5 a2 finish A 1 0
5 a3 finish A 1 0
5 b1 finish B 1 0
5 b2 finish B 1 0`
	check := func(log string) []Violation { t.Helper(); return checkLog(t, cfg, log) }
	// Judged at the preempt line, when A is back within its limit: the
	// false report this log format avoids.
	if got := rulesOf(check(before + after)); !reflect.DeepEqual(got, []string{RuleReclaimVictim}) {
		t.Fatalf("without a stopping line: rules %v, want the (false) reclaim-victim", got)
	}
	// Judged at the decision, when A used 3 of 2: clean.
	if vs := check(before + "\n1 a3 stopping A 1 0 b2" + after); len(vs) != 0 {
		t.Fatalf("with the stopping line: %v", vs)
	}
	// A decision taken while the victim's share is within its limit is a
	// violation at the stopping line, whatever comes after.
	bad := `
0 a1 submit A 1 0
0 a2 submit A 1 0
0 b1 submit B 1 0
0 b2 submit B 1 0
0 a1 start A 1 0
0 a2 start A 1 0
0 b1 start B 1 0
0 b2 start B 1 0
1 b3 submit B 1 0
1 a1 stopping A 1 0 b3
2 a1 preempt A 1 0 b3
2 b3 start B 1 0`
	vs := check(bad)
	if got := rulesOf(vs); !reflect.DeepEqual(got, []string{RuleReclaimVictim}) || vs[0].T != 1 || vs[0].Line != 10 {
		t.Fatalf("decided within its limit: %v, want reclaim-victim at t=1, line 10", vs)
	}
	// The preempt of a restarted server may not know "for": the stopping
	// line's is used, so the job it made room for must still start. (The
	// room a1 gave back is promised to b3, so a1 waiting for it again is
	// not also a head-waits: the fault is b3's never starting.)
	lost := strings.Replace(bad, "2 a1 preempt A 1 0 b3", "2 a1 preempt A 1 0", 1)
	lost = strings.Replace(lost, "2 b3 start B 1 0", "", 1)
	if got := rulesOf(check(lost)); !reflect.DeepEqual(got, []string{RulePreemptedForNothing, RuleReclaimVictim}) {
		t.Fatalf("preempt without for after a stopping line: rules %v", got)
	}
}

// A failed attempt that is retried (or a lost one, requeued) gives its
// capacity back as a fail; the job then starts again. A fail is final only
// when no start follows.
func TestCheckFailThenRetry(t *testing.T) {
	cfg := configtest.Load(t, threeShares)
	clean := `
0 a submit QS2 1 0
0 a start QS2 1 0
1 a fail QS2 1 0
1 a priority QS2 0 5
1 a start QS2 1 5
2 a fail QS2 1 5
2 a start QS2 1 5
3 a fail QS2 1 5
4 b submit QS2 1 0
4 b start QS2 1 0
5 b fail QS2 1 0
6 b fail QS2 0 0`
	vs, sum, err := Check(cfg, bytes.NewReader(parseLog(t, clean)), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 || sum.Retries != 2 || sum.Fails != 5 {
		t.Fatalf("retried attempts: %v, %+v", vs, sum)
	}
	// A job whose fail was final does not give back twice, nor hold twice.
	bad := `
0 a submit QS2 1 0
0 a start QS2 1 0
1 a fail QS2 1 0
2 a finish QS2 1 0`
	vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, bad)), CheckOptions{})
	if got := rulesOf(vs); !reflect.DeepEqual(got, []string{RuleLog}) {
		t.Fatalf("finish after a fail with no start: %v", vs)
	}
}

// Jobs of a queue without quota shares have no share: the environment's
// capacity is checked, the share rules are not.
func TestCheckQueueWithoutShares(t *testing.T) {
	doc := `serviceEnvironments:
  - serviceEnvironmentName: env
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
jobQueues:
  - {jobQueueName: training, priority: 1, serviceEnvironment: env}
`
	cfg, err := config.Parse("fifo", []byte(doc), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clean := `
0 a submit "" 1 0
0 b submit "" 1 0
0 c submit "" 1 0
0 a start "" 1 0
0 b start "" 1 0
1 a finish "" 1 0
1 c start "" 1 0
2 b fail "" 1 0
2 c finish "" 1 0`
	clean = strings.ReplaceAll(clean, `""`, "-")
	vs, sum, err := Check(cfg, bytes.NewReader(parseLog(t, clean)), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 0 || sum.Starts != 3 {
		t.Fatalf("FIFO queue: %v, %+v", vs, sum)
	}
	over := strings.Replace(clean, "1 a finish", "0 d submit - 1 0\n0 d start - 1 0\n1 a finish", 1)
	vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, over)), CheckOptions{})
	if got := rulesOf(vs); !reflect.DeepEqual(got, []string{RuleEnvironmentCapacity}) {
		t.Fatalf("FIFO queue above the environment: %v", vs)
	}
	vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, "0 a submit - 1 0\n0 x submit S 1 0")), CheckOptions{})
	if got := rulesOf(vs); !reflect.DeepEqual(got, []string{RuleLog}) || len(vs) != 1 || vs[0].Jobs[0] != "x" {
		t.Fatalf("a share the FIFO queue does not have: %v", vs)
	}
}

// A line that cannot be read is a violation with its line number; the lines
// after it are still checked.
func TestCheckBadLineInTheMiddle(t *testing.T) {
	cfg := configtest.Load(t, threeShares)
	log := string(parseLog(t, "0 a submit QS2 1 0\n0 a start QS2 1 0")) + "{\"t\":1,\"job\n" +
		string(parseLog(t, "2 b submit QS2 1 0\n2 b start QS2 1 0"))
	vs, sum, err := Check(cfg, strings.NewReader(log), CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Rule != RuleLog || vs[0].Line != 3 || vs[1].Rule != RuleShareLimit || sum.Lines != 5 {
		t.Fatalf("want the bad line 3 and the share limit at line 5: %v, %+v", vs, sum)
	}
}

// TestCheckMinRunTime: a victim preempted once it has run its share's
// minimum run time, counted from its last start, is clean; a job that
// restarted is protected again from its new start; and Settle allows a
// server's log the moment between a pass and its lines.
func TestCheckMinRunTime(t *testing.T) {
	cfg := inlineConfig(t, 2, "A 1 LEND", "B 1 LEND_AND_BORROW -1 minrun=600")
	clean := `
0 b1 submit B 1 0
0 b2 submit B 1 0
0 b1 start B 1 0
0 b2 start B 1 0
100 a1 submit A 1 0
600 b2 preempt B 1 0 a1
600 a1 start A 1 0
700 a1 finish A 1 0
700 b2 start B 1 0
800 a2 submit A 1 0
1300 b2 preempt B 1 0 a2
1300 a2 start A 1 0`
	vs, _, err := Check(cfg, bytes.NewReader(parseLog(t, clean)), CheckOptions{})
	if err != nil || len(vs) != 0 {
		t.Fatalf("clean log: %v %v", vs, err)
	}
	early := strings.Replace(clean, "1300 b2 preempt", "1299 b2 preempt", 1)
	early = strings.Replace(early, "1300 a2 start", "1299 a2 start", 1)
	vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, early)), CheckOptions{})
	if got := rulesOf(vs); !reflect.DeepEqual(got, []string{RuleMinRunTime}) {
		t.Fatalf("preempted 1 s early after a restart: %v", vs)
	}
	if vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, early)), CheckOptions{Settle: 2}); len(vs) != 0 {
		t.Fatalf("with Settle 2 s: %v", vs)
	}

	// The reclaim comes 3 s after the protection ended: a violation of a
	// simulation's log, not of a server's with Settle 5, and none when
	// another job of A's fits nowhere but in the protected capacity
	// anyway (the protection explains nothing when B is within its limit).
	late := strings.Replace(clean, "600 b2 preempt", "603 b2 preempt", 1)
	late = strings.Replace(late, "600 a1 start", "603 a1 start", 1)
	vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, late)), CheckOptions{})
	if got := rulesOf(vs); !reflect.DeepEqual(got, []string{RuleProtectionWait}) || vs[0].T != 600 {
		t.Fatalf("reclaim 3 s after the protection: %v", vs)
	}
	if vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, late)), CheckOptions{Settle: 5}); len(vs) != 0 {
		t.Fatalf("with Settle 5 s: %v", vs)
	}
	within := `
0 b1 submit B 1 0
0 b1 start B 1 0
0 x submit A 1 0
0 x start A 1 0
100 a1 submit A 1 0
900 b1 finish B 1 0
900 x finish A 1 0
900 a1 start A 1 0`
	if vs, _, _ = Check(cfg, bytes.NewReader(parseLog(t, within)), CheckOptions{}); len(vs) != 0 {
		t.Fatalf("B within its limit, A's head waits for its own share: %v", vs)
	}
}

// TestCheckCapacityPlans: a plan's capacity counts in its share's and
// environment's limits from its start to its close (end less warning); a
// plan job starts only then, within the plan's count; after the end
// nothing of the plan holds capacity. The clean log is what the engine
// does (scenario plan_window); each spoiled one breaks one rule.
func TestCheckCapacityPlans(t *testing.T) {
	doc := inlineDoc(1, "A 1 LEND") + `capacityPlans:
  - {capacityPlanName: P, jobQueue: training, quotaShareName: A, instanceType: ml.g5.xlarge, instanceCount: 1,
     startTime: "1970-01-01T00:01:40Z", endTime: "1970-01-01T00:03:20Z", warningSeconds: 20}
`
	cfg, err := config.Parse("plans", []byte(doc), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	clean := `
0 own submit A 1 0
0 own start A 1 0
10 p1 submit A 1 0 plan=P
100 p1 start A 1 0
180 p1 stopping A 1 0
190 p1 preempt A 1 0
300 own finish A 1 0`
	for _, tc := range []struct {
		name, log string
		rules     []string
	}{
		{"clean", clean, nil},
		{"a plan job before its window", strings.Replace(clean, "100 p1 start", "50 p1 start", 1), []string{RuleBorrowSource, RulePlan, RuleEnvironmentCapacity, RuleShareLimit}},
		{"a plan job still running after the end", strings.Replace(strings.Replace(clean, "180 p1 stopping A 1 0\n", "", 1), "190 p1 preempt", "250 p1 preempt", 1), []string{RulePlan}},
		{"a second plan job beyond the plan's count", strings.Replace(clean, "180 p1 stopping", "120 p2 submit A 1 0 plan=P\n120 p2 start A 1 0\n180 p1 stopping", 1),
			[]string{RuleBorrowSource, RulePlan, RuleEnvironmentCapacity, RuleShareLimit}},
	} {
		vs, _, err := Check(cfg, bytes.NewReader(parseLog(t, tc.log)), CheckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := rulesOf(vs); !slices.Equal(got, tc.rules) {
			t.Errorf("%s: rules %v, want %v:\n%v", tc.name, got, tc.rules, vs)
		}
	}
}
