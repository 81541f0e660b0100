package engine

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"qshare"
)

// TestProperty drives the engine and the reference model (reference_test.go)
// with random configurations and random command streams, compares their
// decisions after every step, and checks every guarantee of rule 9 after
// every step. More cases: go test ./engine -run TestProperty -rapid.checks=10000
func TestProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := newPropRun(rt)
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			p.step(rt, i)
		}
	})
}

var strategies = []qshare.Strategy{qshare.StrategyReserve, qshare.StrategyLend, qshare.StrategyLendAndBorrow}

type propRun struct {
	e   *Engine
	m   *refModel
	T   int
	now int64
	n   int
	// lowered marks a share whose limit was lowered at some time: the
	// guarantees about its own limit and its jobs being safe are void.
	lowered map[int]bool
	// envOver marks a type whose environment limit was lowered below its
	// usage: no preemption follows, usage stays above until jobs finish.
	envOver map[int]bool
	// final marks jobs whose preemption was final.
	final map[string]bool
	// victims of each reserved job not yet released.
	victimsOf map[string]map[string]bool
	base      time.Time
	log       []string
}

func newPropRun(rt *rapid.T) *propRun {
	p := &propRun{e: New(), lowered: map[int]bool{}, envOver: map[int]bool{}, final: map[string]bool{}, victimsOf: map[string]map[string]bool{},
		base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	p.T = rapid.IntRange(1, 3).Draw(rt, "types")
	nShares := rapid.IntRange(1, 20).Draw(rt, "shares")
	m := &refModel{T: p.T, jobs: map[string]*refJob{}}
	p.m = m
	var owned = make([]int64, p.T)
	for i := 0; i < nShares; i++ {
		sh := &refShare{name: fmt.Sprintf("S%02d", i), limit: make([]int64, p.T)}
		st := strategies[rapid.IntRange(0, 2).Draw(rt, "strategy")]
		sh.strategy = string(st)
		sh.borrow = -1
		if st == qshare.StrategyLendAndBorrow {
			sh.borrow = []int64{-1, 0, 50, 100, 200}[rapid.IntRange(0, 4).Draw(rt, "borrow")]
		}
		sh.inShare = rapid.Bool().Draw(rt, "inshare")
		sh.minRun = p.drawMinRun(rt)
		for t := 0; t < p.T; t++ {
			if t == 0 || rapid.Bool().Draw(rt, "hasType") {
				sh.limit[t] = int64(rapid.IntRange(1, 4).Draw(rt, "limit"))
				owned[t] += sh.limit[t]
			}
		}
		m.shares = append(m.shares, sh)
	}
	m.env = make([]int64, p.T)
	for t := 0; t < p.T; t++ {
		// From badly oversubscribed to generous.
		m.env[t] = int64(rapid.IntRange(0, int(owned[t])+4).Draw(rt, "env"))
	}
	must(rt, p.e.SetEnvironment(EnvironmentConfig{Name: "E", Limits: p.capOf(m.env)}))
	must(rt, p.e.SetQueue(QueueConfig{Name: "Q", Environment: "E"}))
	for s := range m.shares {
		must(rt, p.e.SetShare(p.shareConfig(s)))
	}
	// Capacity plans (issue 21) in half the runs: windows that open and
	// close within the first hundred seconds, with or without a warning.
	if rapid.Bool().Draw(rt, "plans") {
		for k := range rapid.IntRange(1, 2).Draw(rt, "nplans") {
			start := int64(rapid.IntRange(0, 40).Draw(rt, "planStart"))
			length := int64(rapid.IntRange(2, 60).Draw(rt, "planLength"))
			warn := int64(rapid.IntRange(0, int(min(5, length-1))).Draw(rt, "planWarn"))
			pl := &refPlan{name: fmt.Sprintf("P%d", k), s: rapid.IntRange(0, nShares-1).Draw(rt, "planShare"), t: rapid.IntRange(0, p.T-1).Draw(rt, "planType"),
				n: int64(rapid.IntRange(1, 3).Draw(rt, "planCount"))}
			sec := func(x int64) int64 { return p.base.Add(time.Duration(x) * time.Second).UnixNano() }
			pl.start, pl.end, pl.close = sec(start), sec(start+length), sec(start+length-warn)
			m.plans = append(m.plans, pl)
			must(rt, p.e.SetPlan(PlanConfig{Name: pl.name, Queue: "Q", Share: m.shares[pl.s].name, InstanceType: typeName(pl.t), Count: pl.n,
				Start: timeOf(pl.start), End: timeOf(pl.end), Warning: time.Duration(warn) * time.Second}))
		}
	}
	return p
}

// timeOf is the time of ns nanoseconds since the epoch.
func timeOf(ns int64) time.Time { return time.Unix(0, ns) }

func must(rt *rapid.T, err error) {
	if err != nil {
		rt.Fatalf("unexpected error: %v", err)
	}
}

func (p *propRun) capOf(v []int64) qshare.Capacity {
	c := qshare.Capacity{}
	for t, n := range v {
		if n != 0 {
			c[typeName(t)] = n
		}
	}
	return c
}

func (p *propRun) shareConfig(s int) ShareConfig {
	sh := p.m.shares[s]
	return ShareConfig{Queue: "Q", Name: sh.name, Limits: p.capOf(sh.limit), Strategy: qshare.Strategy(sh.strategy), BorrowLimit: sh.borrow, InSharePreemption: sh.inShare,
		MinRunTime: time.Duration(sh.minRun)}
}

// drawMinRun draws a share's minimum run time: none for half of them, else
// 1 to 12 seconds, about as long as a few steps (each step is a second, a
// tick sometimes more), so that protections end between and at steps.
func (p *propRun) drawMinRun(rt *rapid.T) int64 {
	if rapid.Bool().Draw(rt, "protects") {
		return 0
	}
	return int64(rapid.IntRange(1, 12).Draw(rt, "minRun")) * int64(time.Second)
}

func (p *propRun) jobsIn(states ...JobState) []string {
	var ids []string
	for id, j := range p.m.jobs {
		for _, s := range states {
			if j.state == s {
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids
}

func (p *propRun) step(rt *rapid.T, i int) {
	p.now++
	m := p.m
	var cmd string
	switch k := rapid.IntRange(0, 9).Draw(rt, "cmd"); {
	case k <= 3: // submit
		p.n++
		id := fmt.Sprintf("j%03d", p.n)
		s := rapid.IntRange(0, len(m.shares)-1).Draw(rt, "share")
		dem := make([]int64, p.T)
		dem[rapid.IntRange(0, p.T-1).Draw(rt, "type")] = int64(rapid.IntRange(1, 3).Draw(rt, "count"))
		if p.T > 1 && rapid.IntRange(0, 3).Draw(rt, "multi") == 0 {
			dem[rapid.IntRange(0, p.T-1).Draw(rt, "type2")] += 1
		}
		plan, planName := -1, ""
		for k, pl := range m.plans {
			if pl.s == s && rapid.IntRange(0, 2).Draw(rt, "planJob") > 0 {
				plan, planName = k, pl.name
				dem = make([]int64, p.T)
				dem[pl.t] = int64(rapid.IntRange(1, int(pl.n)).Draw(rt, "planDemand"))
				break
			}
		}
		prio := rapid.IntRange(0, 4).Draw(rt, "prio")
		retries := rapid.IntRange(-1, 2).Draw(rt, "retries")
		// Equal creation times happen: ties are broken by ID.
		created := p.now - int64(rapid.IntRange(0, 1).Draw(rt, "tie"))
		must(rt, p.e.Submit(JobSpec{ID: id, Queue: "Q", Share: m.shares[s].name, Priority: prio, Created: p.base.Add(time.Duration(created) * time.Second), Demand: p.capOf(dem), PreemptionRetries: retries, Plan: planName}))
		m.jobs[id] = &refJob{id: id, sh: s, prio: prio, created: p.base.Add(time.Duration(created) * time.Second).UnixNano(), dem: dem, state: JobRunnable, retries: retries, plan: plan}
		cmd = fmt.Sprintf("submit %s share=%s prio=%d dem=%v plan=%s", id, m.shares[s].name, prio, dem, planName)
	case k <= 5: // finish a holding job, or release a stopping one
		ids := p.jobsIn(JobHolding, JobStopping)
		if len(ids) == 0 {
			return
		}
		id := rapid.SampledFrom(ids).Draw(rt, "job")
		requeue := false
		if j := m.jobs[id]; j.state == JobStopping && j.reserver != "" {
			requeue = !p.final[id]
		} else if j.state == JobStopping && j.planStopped {
			requeue = true // stopped because its plan ended
			j.planStopped = false
		} else if rapid.IntRange(0, 4).Draw(rt, "retry") == 0 {
			requeue = true // a failed attempt with retries left
		}
		must(rt, p.e.Release(id, requeue))
		m.release(id, requeue)
		for r, vs := range p.victimsOf {
			delete(vs, id)
			_ = r
		}
		cmd = fmt.Sprintf("release %s requeue=%v", id, requeue)
	case k == 6: // priority change
		ids := p.jobsIn(JobRunnable, JobHolding, JobReserved)
		if len(ids) == 0 {
			return
		}
		id := rapid.SampledFrom(ids).Draw(rt, "job")
		prio := rapid.IntRange(0, 6).Draw(rt, "newprio")
		must(rt, p.e.SetPriority(id, prio))
		m.jobs[id].prio = prio
		cmd = fmt.Sprintf("priority %s %d", id, prio)
	case k == 7: // limit change
		s := rapid.IntRange(0, len(m.shares)-1).Draw(rt, "share")
		t := rapid.IntRange(0, p.T-1).Draw(rt, "type")
		l := int64(rapid.IntRange(0, 5).Draw(rt, "newlimit"))
		if l < m.shares[s].limit[t] {
			p.lowered[s] = true
		}
		m.shares[s].limit[t] = l
		if rapid.IntRange(0, 3).Draw(rt, "minRunChange") == 0 {
			m.shares[s].minRun = p.drawMinRun(rt)
		}
		must(rt, p.e.SetShare(p.shareConfig(s)))
		cmd = fmt.Sprintf("limit %s type%d=%d minRun=%s", m.shares[s].name, t, l, time.Duration(m.shares[s].minRun))
	case k == 9 && rapid.Bool().Draw(rt, "envChange"): // environment limit change
		t := rapid.IntRange(0, p.T-1).Draw(rt, "type")
		l := int64(rapid.IntRange(0, int(m.env[t])+3).Draw(rt, "newEnv"))
		m.env[t] = l
		p.envOver[t] = m.envUsed(t) > l
		must(rt, p.e.SetEnvironment(EnvironmentConfig{Name: "E", Limits: p.capOf(m.env)}))
		cmd = fmt.Sprintf("env type%d=%d", t, l)
	case k == 8: // the caller stops a job
		ids := p.jobsIn(JobRunnable, JobHolding, JobReserved)
		if len(ids) == 0 {
			return
		}
		id := rapid.SampledFrom(ids).Draw(rt, "job")
		must(rt, p.e.Stopping(id))
		m.stopping(id)
		delete(p.victimsOf, id)
		cmd = fmt.Sprintf("stop %s", id)
	default:
		// Only time passes: a pass is due only if a protection ended
		// (NextWake); the reference rescans anyway.
		p.now += int64(rapid.IntRange(0, 6).Draw(rt, "jump"))
		cmd = fmt.Sprintf("tick to %d", p.now)
	}
	p.log = append(p.log, cmd)
	now := p.base.Add(time.Duration(p.now) * time.Second)
	before := make([][]int64, len(m.shares))
	for s := range m.shares {
		before[s] = make([]int64, p.T)
		for t := 0; t < p.T; t++ {
			before[s][t] = m.footprint(s, t)
		}
	}
	envBefore := make([]int64, p.T)
	for t := 0; t < p.T; t++ {
		envBefore[t] = m.envUsed(t)
	}
	got := p.e.Schedule(now)
	want := m.schedule(now.UnixNano())
	gotCore := coreDecisions(got)
	wantCore := coreDecisions(want)
	if !reflect.DeepEqual(gotCore, wantCore) {
		rt.Fatalf("step %d (%s): decisions differ\nengine:    %v\nreference: %v\nlog:\n%s", i, cmd, gotCore, wantCore, strings.Join(p.log, "\n"))
	}
	p.log = append(p.log, "  -> "+strings.Join(gotCore, "; "))
	// A plan's close cancels the reservations of its jobs (their victims
	// give back to nobody), and takes capacity away as a lowered limit.
	for _, id := range m.cancelled {
		delete(p.victimsOf, id)
	}
	for t := range m.closed {
		if m.envUsed(t) > m.envLim(t) {
			p.envOver[t] = true
		}
	}
	for s := range m.closedShares {
		p.lowered[s] = true
	}
	// The engine asks to be woken only for the future.
	if at, ok := p.e.NextWake(); ok && !at.After(now) {
		rt.Fatalf("step %d: NextWake %v is not after the pass at %v", i, at, now)
	}
	// "never preempted for a job that then does not start": a reserved job
	// whose victims have all been released starts in this pass.
	for r, vs := range p.victimsOf {
		if len(vs) == 0 {
			if j := m.jobs[r]; j != nil && j.state != JobHolding && j.state != JobStopping {
				rt.Fatalf("step %d: job %s had all its victims released but did not start (state %v)\n%s", i, r, j.state, strings.Join(p.log, "\n"))
			}
			delete(p.victimsOf, r)
		}
	}
	for _, d := range got {
		switch d.Kind {
		case DecisionStart:
			// Started (perhaps before its victims stopped): its promise is kept.
			delete(p.victimsOf, d.Job)
		case DecisionPreempt:
			if d.For == "" {
				// Stopped because a plan's capacity ends: to stop by its end,
				// and never final.
				if d.StopBy.IsZero() || d.Final {
					rt.Fatalf("step %d: preemption of %s for nobody: stop by %v, final %v", i, d.Job, d.StopBy, d.Final)
				}
				continue
			}
			if d.Final {
				p.final[d.Job] = true
			}
			if p.victimsOf[d.For] == nil {
				p.victimsOf[d.For] = map[string]bool{}
			}
			p.victimsOf[d.For][d.Job] = true
			// Independent of the reference: a victim holds some of a type
			// the job it makes room for needs; an in-share victim is of the
			// same share and of strictly lower priority; a cross-share one
			// is of another share.
			v, r := m.jobs[d.Job], m.jobs[d.For]
			if v == nil || r == nil {
				rt.Fatalf("step %d: preemption of %s for %s: unknown job", i, d.Job, d.For)
			}
			overlap := false
			for t := 0; t < p.T; t++ {
				if v.dem[t] > 0 && r.dem[t] > 0 {
					overlap = true
				}
			}
			if !overlap {
				rt.Fatalf("step %d: %s was preempted for %s but holds no type it needs\n%s", i, d.Job, d.For, strings.Join(p.log, "\n"))
			}
			if d.CrossShare == (v.sh == r.sh) {
				rt.Fatalf("step %d: preemption of %s for %s: cross-share=%v but shares %d and %d", i, d.Job, d.For, d.CrossShare, v.sh, r.sh)
			}
			if !d.CrossShare && v.prio >= r.prio {
				rt.Fatalf("step %d: in-share preemption of %s (priority %d) for %s (priority %d)", i, d.Job, v.prio, d.For, r.prio)
			}
			// No victim before its share's minimum run time.
			if ran := time.Duration(now.UnixNano() - v.started); ran < time.Duration(m.shares[v.sh].minRun) {
				rt.Fatalf("step %d: %s was preempted after running %s, less than its share's minimum run time %s\n%s", i, d.Job, ran, time.Duration(m.shares[v.sh].minRun), strings.Join(p.log, "\n"))
			}
			s := p.shareIndex(d.Share)
			if sh := m.shares[s]; sh.strategy == "RESERVE" && !sh.inShare && !p.lowered[s] {
				rt.Fatalf("step %d: job %s of RESERVE share %s with in-share preemption disabled and unchanged limits was preempted\n%s", i, d.Job, d.Share, strings.Join(p.log, "\n"))
			}
		}
	}
	p.checkAccounting(rt, i)
	p.checkGuarantees(rt, i, before, envBefore)
}

func (p *propRun) shareIndex(name string) int {
	for i, s := range p.m.shares {
		if s.name == name {
			return i
		}
	}
	return -1
}

func coreDecisions(ds []Decision) []string {
	var out []string
	for _, d := range ds {
		if d.Kind == DecisionWait {
			continue
		}
		s := fmt.Sprintf("%s %s", d.Kind, d.Job)
		if d.Kind == DecisionPreempt {
			s += fmt.Sprintf(" for=%s cross=%v final=%v", d.For, d.CrossShare, d.Final)
			if !d.StopBy.IsZero() {
				s += fmt.Sprintf(" stopBy=%d", d.StopBy.UnixNano())
			}
		}
		if len(d.Borrowed) > 0 {
			s += " borrowed=" + qshare.Capacity(d.Borrowed).String()
		}
		out = append(out, s)
	}
	return out
}

// checkAccounting compares the engine's incremental accounting with the
// reference's recomputation and the engine's own job states.
func (p *propRun) checkAccounting(rt *rapid.T, i int) {
	m := p.m
	views := p.e.Shares("Q")
	for s, v := range views {
		for t := 0; t < p.T; t++ {
			if got, want := v.Usage[typeName(t)], m.used(s, t); got != want {
				rt.Fatalf("step %d: share %s usage of %s: engine %d, reference %d\n%s", i, v.Name, typeName(t), got, want, strings.Join(p.log, "\n"))
			}
		}
	}
	for id, j := range m.jobs {
		v, ok := p.e.Job(id)
		if !ok || v.State != j.state || v.Preemptions != j.preemptions {
			rt.Fatalf("step %d: job %s: engine %+v (%v), reference state %v preemptions %d", i, id, v, ok, j.state, j.preemptions)
		}
	}
	if p.e.jobs.count != len(m.jobs) {
		rt.Fatalf("step %d: engine has %d jobs, reference %d", i, p.e.jobs.count, len(m.jobs))
	}
	st := p.e.Stats()
	if st.Runnable != len(p.jobsIn(JobRunnable)) || st.Holding != len(p.jobsIn(JobHolding, JobStopping)) {
		rt.Fatalf("step %d: stats %+v, reference runnable %d holding %d", i, st, len(p.jobsIn(JobRunnable)), len(p.jobsIn(JobHolding, JobStopping)))
	}
}

// checkGuarantees checks rule 9 on the reference state, which the
// accounting check has just shown equal to the engine's.
func (p *propRun) checkGuarantees(rt *rapid.T, i int, before [][]int64, envBefore []int64) {
	m := p.m
	fail := func(f string, args ...any) {
		rt.Fatalf("step %d: %s\n%s", i, fmt.Sprintf(f, args...), strings.Join(p.log, "\n"))
	}
	for t := 0; t < p.T; t++ {
		// Usage never exceeds the environment's limit, unless the limit was
		// lowered below usage: then no pass may add to it until it is back
		// under the limit.
		u := m.envUsed(t)
		was := envBefore[t]
		if was <= m.envLim(t) {
			p.envOver[t] = false // back under the limit before this pass
		}
		if p.envOver[t] {
			if u > was {
				fail("environment usage of %s grew from %d to %d while above its lowered limit %d", typeName(t), was, u, m.envLim(t))
			}
			if u <= m.envLim(t) {
				p.envOver[t] = false
			}
		} else if u > m.envLim(t) {
			fail("environment usage of %s is %d, above its limit %d", typeName(t), u, m.envLim(t))
		}
		for s, sh := range m.shares {
			if p.lowered[s] {
				continue
			}
			c := m.used(s, t)
			switch sh.strategy {
			case "LEND", "RESERVE":
				if c > m.lim(s, t) {
					fail("%s share %s holds %d %s, above its own %d", sh.strategy, sh.name, c, typeName(t), m.lim(s, t))
				}
			default:
				if mx, unl := m.maxUse(s, t); !unl && c > mx {
					fail("share %s holds %d %s, above its borrow cap %d", sh.name, c, typeName(t), mx)
				}
			}
		}
		// Nobody uses a RESERVE share's capacity: when a non-RESERVE share
		// took more of a type in this pass, the RESERVE shares' idle
		// capacity of that type is still free.
		// What a RESERVE share's own stopping jobs hold is its own, not
		// someone else's use of its capacity.
		free := m.envLim(t) - m.envUsed(t)
		for s, sh := range m.shares {
			if sh.strategy == "RESERVE" {
				free += m.stoppingHeld(s, t)
			}
		}
		ri := m.protected(t, -1)
		for s, sh := range m.shares {
			if m.footprint(s, t) > before[s][t] && sh.strategy != "RESERVE" && free < ri {
				fail("share %s took capacity while the environment's free %s (%d) is less than the RESERVE shares' idle capacity (%d)", sh.name, typeName(t), free, ri)
			}
		}
	}
	// No head waits while it fits its share's own limit and the capacity it
	// may use is free.
	zero := make([]int64, p.T)
	for s := range m.shares {
		h := m.head(s)
		if h == nil || m.misconfigured(s, h) || !m.planOK(h) {
			continue
		}
		if m.ownFit(s, h, zero) && m.freeFit(s, h, zero) {
			fail("head %s of share %s fits its own limit and free capacity but waits", h.id, m.shares[s].name)
		}
		// The same with the environment's raw free capacity: a head that
		// fits its own limit never waits while the environment has room
		// for it, unless that room is another RESERVE share's idle
		// capacity, or an environment limit was lowered.
		rawFits := m.ownFit(s, h, zero)
		for t := 0; t < p.T; t++ {
			if h.dem[t] > 0 && (h.dem[t] > m.envLim(t)-m.envUsed(t) || m.protected(t, s) > 0 || p.envOver[t]) {
				rawFits = false
			}
		}
		if rawFits {
			fail("head %s of share %s fits its own limit and the environment has room for it, but waits", h.id, m.shares[s].name)
		}
	}
	// Every head that waits has a reason, and a misconfigured one says so.
	for s := range m.shares {
		h := m.head(s)
		if h == nil {
			continue
		}
		v, _ := p.e.Job(h.id)
		if v.Reason == "" {
			fail("head %s of share %s waits without a reason", h.id, m.shares[s].name)
		}
		if m.misconfigured(s, h) && !strings.HasPrefix(v.Reason, "MISCONFIGURATION:") {
			fail("misconfigured head %s has reason %q", h.id, v.Reason)
		}
	}
}
