package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/cockroachdb/datadriven"

	"qshare"
)

// The scenario scripts under testdata/ drive one Engine through a readable
// command language and print what it decides. Regenerate the expected
// output with: go test ./engine -run TestScenarios -rewrite
//
//	env name=E1 ml.g5.xlarge=3              create or update an environment
//	queue name=Q1 env=E1                    create or update a queue
//	share name=QS1 strategy=LEND_AND_BORROW borrow=200 inshare ml.g5.xlarge=1 [queue=Q1] [disabled] [minrun=SECONDS]
//	share name=_queue strategy=RESERVE ml.g5.xlarge=4 fair [decay=S] [reserve=C] [weights=a:0.5,b*:2]
//	                                        a fair-share share (submit with ident=)
//	limits share=QS1 ml.g5.xlarge=0 [minrun=SECONDS]   change a share's limits, keeping the rest
//	plan name=P share=QS1 type=ml.p5.48xlarge count=2 start=S end=S [warn=S] [queue=Q1]
//	                                        a capacity plan, window [start, end) in script seconds
//	remove-plan name=P
//	submit id=j share=QS1 prio=3 ml.g5.xlarge=1 [retries=N] [at=SECONDS] [ident=ID] [plan=P]
//	                                        a type may repeat (instance groups: summed)
//	restore id=j share=QS1 prio=1 ml.g5.xlarge=1   a job that already holds its demand
//	priority id=j prio=4                    UpdateServiceJob(schedulingPriority)
//	finish id=j                             the job's attempt ended; forget the job
//	release id=j                            a preempted job stopped: requeue it, or
//	                                        forget it if its preemption was final
//	requeue id=j                            the attempt stopped; requeue the job
//	stop id=j                               the caller terminates the job (Stopping)
//	schedule [at=SECONDS]                   one pass: decisions, then capacity (and the
//	                                        next wake-up NextWake asks for, if any)
//	show                                    jobs and capacity
//	front queue=Q1 n=5                      Front
//	fairshare [queue=Q1]                    FairShare: identifiers, weights, usage
//	remove-share name=QS1 | remove-queue name=Q1 | remove-env name=E1
//
// Time is a script clock in seconds that advances by one at each command
// unless at= sets it.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenario", func(t *testing.T, path string) {
		h := newHarness()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

type harness struct {
	e         *Engine
	clock     int64
	lastQueue string
	final     map[string]bool
	base      time.Time
}

func newHarness() *harness {
	return &harness{e: New(), final: map[string]bool{}, base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (h *harness) now() time.Time { return h.base.Add(time.Duration(h.clock) * time.Second) }

// capArgs collects the arguments whose key contains a dot (instance types).
func capArgs(t *testing.T, d *datadriven.TestData) qshare.Capacity {
	c := qshare.Capacity{}
	for _, a := range d.CmdArgs {
		if !strings.Contains(a.Key, ".") {
			continue
		}
		for _, v := range a.Vals {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: %s=%s: %v", d.Pos, a.Key, v, err)
			}
			c[a.Key] += n
		}
	}
	return c
}

func strArg(d *datadriven.TestData, key, def string) string {
	if a, ok := d.Arg(key); ok && len(a.Vals) > 0 {
		return a.Vals[0]
	}
	return def
}

func intArg(t *testing.T, d *datadriven.TestData, key string, def int64) int64 {
	s := strArg(d, key, "")
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%s: %s=%s: %v", d.Pos, key, s, err)
	}
	return n
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("error (%s): %v\n", qshare.ErrorCodeOf(err), err)
}

func (h *harness) shareConfig(queue, name string) (ShareConfig, bool) {
	q := h.e.queues[queue]
	if q == nil || q.shares[name] == nil {
		return ShareConfig{}, false
	}
	c := q.shares[name].cfg
	c.Limits = c.Limits.Clone()
	return c, true
}

func (h *harness) run(t *testing.T, d *datadriven.TestData) string {
	if at := intArg(t, d, "at", -1); at >= 0 {
		h.clock = at
	} else {
		h.clock++
	}
	e := h.e
	switch d.Cmd {
	case "env":
		return errText(e.SetEnvironment(EnvironmentConfig{Name: strArg(d, "name", ""), Limits: capArgs(t, d)}))
	case "queue":
		h.lastQueue = strArg(d, "name", "")
		return errText(e.SetQueue(QueueConfig{Name: h.lastQueue, Environment: strArg(d, "env", "")}))
	case "share":
		c := ShareConfig{
			Queue:             strArg(d, "queue", h.lastQueue),
			Name:              strArg(d, "name", ""),
			Limits:            capArgs(t, d),
			Strategy:          qshare.Strategy(strArg(d, "strategy", "")),
			BorrowLimit:       intArg(t, d, "borrow", -1),
			InSharePreemption: d.HasArg("inshare"),
			Disabled:          d.HasArg("disabled"),
			MinRunTime:        time.Duration(intArg(t, d, "minrun", 0)) * time.Second,
		}
		if d.HasArg("fair") {
			c.FairShare = &FairShareConfig{DecaySeconds: intArg(t, d, "decay", 0), ComputeReservation: intArg(t, d, "reserve", 0)}
			for _, w := range strings.Split(strArg(d, "weights", ""), ",") {
				if id, f, ok := strings.Cut(w, ":"); ok {
					x, err := strconv.ParseFloat(f, 64)
					if err != nil {
						t.Fatalf("%s: weights: %v", d.Pos, err)
					}
					c.FairShare.Weights = append(c.FairShare.Weights, ShareWeight{Identifier: id, Factor: x})
				}
			}
		}
		return errText(e.SetShare(c))
	case "limits":
		c, ok := h.shareConfig(strArg(d, "queue", h.lastQueue), strArg(d, "share", ""))
		if !ok {
			return "no such share\n"
		}
		for k, v := range capArgs(t, d) {
			c.Limits[k] = v
		}
		if b := intArg(t, d, "borrow", -2); b != -2 {
			c.BorrowLimit = b
		}
		if s := strArg(d, "strategy", ""); s != "" {
			c.Strategy = qshare.Strategy(s)
		}
		if p := strArg(d, "inshare", ""); p != "" {
			c.InSharePreemption = p == "on"
		}
		if m := intArg(t, d, "minrun", -1); m >= 0 {
			c.MinRunTime = time.Duration(m) * time.Second
		}
		return errText(e.SetShare(c))
	case "submit", "restore":
		spec := JobSpec{
			ID:                strArg(d, "id", ""),
			Queue:             strArg(d, "queue", h.lastQueue),
			Share:             strArg(d, "share", ""),
			Priority:          int(intArg(t, d, "prio", 0)),
			Created:           h.now(),
			Demand:            capArgs(t, d),
			PreemptionRetries: int(intArg(t, d, "retries", -1)),
			ShareIdentifier:   strArg(d, "ident", ""),
			Plan:              strArg(d, "plan", ""),
		}
		if d.Cmd == "restore" {
			return errText(e.Restore(spec, h.now()))
		}
		return errText(e.Submit(spec))
	case "plan":
		sec := func(k string) time.Time { return h.base.Add(time.Duration(intArg(t, d, k, 0)) * time.Second) }
		return errText(e.SetPlan(PlanConfig{
			Name: strArg(d, "name", ""), Queue: strArg(d, "queue", h.lastQueue), Share: strArg(d, "share", ""),
			InstanceType: strArg(d, "type", ""), Count: intArg(t, d, "count", 0),
			Start: sec("start"), End: sec("end"), Warning: time.Duration(intArg(t, d, "warn", 0)) * time.Second,
		}))
	case "remove-plan":
		return errText(e.RemovePlan(strArg(d, "name", "")))
	case "priority":
		return errText(e.SetPriority(strArg(d, "id", ""), int(intArg(t, d, "prio", 0))))
	case "finish":
		return errText(e.Release(strArg(d, "id", ""), false))
	case "requeue":
		return errText(e.Release(strArg(d, "id", ""), true))
	case "release":
		id := strArg(d, "id", "")
		return errText(e.Release(id, !h.final[id]))
	case "stop":
		return errText(e.Stopping(strArg(d, "id", "")))
	case "remove-share":
		return errText(e.RemoveShare(strArg(d, "queue", h.lastQueue), strArg(d, "name", "")))
	case "remove-queue":
		return errText(e.RemoveQueue(strArg(d, "name", "")))
	case "remove-env":
		return errText(e.RemoveEnvironment(strArg(d, "name", "")))
	case "schedule":
		var b strings.Builder
		ds := e.Schedule(h.now())
		for _, dec := range ds {
			if dec.Kind == DecisionPreempt && dec.Final {
				h.final[dec.Job] = true
			}
			b.WriteString(formatDecision(dec))
		}
		if len(ds) == 0 {
			b.WriteString("no decisions\n")
		}
		if at, ok := e.NextWake(); ok {
			fmt.Fprintf(&b, "next wake-up at %d\n", int64(at.Sub(h.base)/time.Second))
		}
		b.WriteString(h.capacity())
		return b.String()
	case "show":
		return h.jobs() + h.capacity()
	case "fairshare":
		var b strings.Builder
		w := tabwriter.NewWriter(&b, 0, 1, 2, ' ', 0)
		fmt.Fprintln(w, "identifier\tweight\tusage\tholding\trunnable")
		for _, u := range e.FairShare(strArg(d, "queue", h.lastQueue)) {
			fmt.Fprintf(w, "%s\t%g\t%.1f\t%d\t%d\n", u.ShareIdentifier, u.Weight, u.Usage, u.Holding, u.Runnable)
		}
		w.Flush()
		return b.String()
	case "front":
		return strings.Join(e.Front(strArg(d, "queue", h.lastQueue), int(intArg(t, d, "n", 10))), " ") + "\n"
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return ""
}

func formatDecision(d Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s (%s)", d.Kind, d.Job, d.Share)
	if d.Kind == DecisionPreempt {
		kind := "in-share"
		if d.CrossShare {
			kind = "cross-share"
		}
		if d.For != "" {
			fmt.Fprintf(&b, " for %s", d.For)
		}
		fmt.Fprintf(&b, ", %s", kind)
		if d.Final {
			b.WriteString(", final")
		}
		if !d.StopBy.IsZero() {
			fmt.Fprintf(&b, ", stop by %s", d.StopBy.UTC().Format(time.RFC3339))
		}
	}
	if len(d.Borrowed) > 0 {
		fmt.Fprintf(&b, " borrowed=%s", d.Borrowed)
	}
	fmt.Fprintf(&b, ": %s\n", d.Reason)
	return b.String()
}

func (h *harness) jobs() string {
	ids := h.e.jobs.ids()
	sort.Strings(ids)
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 1, 2, ' ', 0)
	fmt.Fprintln(w, "job\tshare\tprio\tstate\tpreempted\tdemand")
	for _, id := range ids {
		v, _ := h.e.Job(id)
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%s\n", v.ID, v.Share, v.Priority, v.State, v.Preemptions, v.Demand)
	}
	w.Flush()
	return b.String()
}

func (h *harness) capacity() string {
	var b strings.Builder
	var envs []string
	for n := range h.e.envs {
		envs = append(envs, n)
	}
	sort.Strings(envs)
	for _, n := range envs {
		env := h.e.envs[n]
		fmt.Fprintf(&b, "%s: used %s of %s\n", n, h.e.toCapacity(env.used), h.e.toCapacity(env.limit))
		var queues []string
		for q := range env.queues {
			queues = append(queues, q)
		}
		sort.Strings(queues)
		w := tabwriter.NewWriter(&b, 0, 1, 2, ' ', 0)
		fmt.Fprintln(w, "  share\tstrategy\ttype\town\tmax\tused\tborrowed\tlent\tidle\trunnable\tholding\treserved\thead")
		for _, q := range queues {
			for _, v := range h.e.Shares(q) {
				name := v.Name
				if len(queues) > 1 {
					name = q + "/" + v.Name
				}
				types := map[string]bool{}
				for _, c := range []qshare.Capacity{v.Limits, v.Usage} {
					for _, t := range c.Types() {
						types[t] = true
					}
				}
				var ts []string
				for t := range types {
					ts = append(ts, t)
				}
				sort.Strings(ts)
				if len(ts) == 0 {
					ts = []string{"-"}
				}
				for i, t := range ts {
					mx := fmt.Sprint(v.MaxUsage[t])
					if v.MaxUsage[t] < 0 {
						mx = "any"
					}
					head := ""
					if i == 0 {
						head = v.Head
					}
					fmt.Fprintf(w, "  %s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", name, v.Strategy, t, v.Limits[t], mx, v.Usage[t],
						attrib(v.Borrowed[t], v.BorrowedFrom, t), attrib(v.Lent[t], v.LentTo, t), v.Idle[t], v.Runnable, v.Holding, v.Reserved, head)
				}
			}
		}
		w.Flush()
	}
	return b.String()
}

func attrib(n int64, by map[string]qshare.Capacity, t string) string {
	if n == 0 {
		return "0"
	}
	var names []string
	for k, c := range by {
		if c[t] > 0 {
			if k == "" {
				k = "unowned"
			}
			names = append(names, fmt.Sprintf("%s:%d", k, c[t]))
		}
	}
	sort.Strings(names)
	return fmt.Sprintf("%d(%s)", n, strings.Join(names, ","))
}
