package engine

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"qshare"
)

// TestFairShareProperty drives a fair-share queue and a plain reference of
// fair share with the same random streams (submits, finishes, priority
// changes, time passing) and compares their starts after every step; it
// also checks that no pass preempts, and that usage never exceeds the
// environment. The reference recomputes everything from its job list: the
// order of identifiers by decayed usage, each one's head by priority and
// creation time, computeReservation's part.
func TestFairShareProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nTypes := rapid.IntRange(1, 2).Draw(rt, "types")
		limits := make([]int64, nTypes)
		for i := range limits {
			limits[i] = int64(rapid.IntRange(1, 8).Draw(rt, "limit"))
		}
		nIDs := rapid.IntRange(1, 5).Draw(rt, "identifiers")
		cfg := FairShareConfig{DecaySeconds: int64(rapid.IntRange(0, 100).Draw(rt, "decay")), ComputeReservation: int64(rapid.SampledFrom([]int{0, 0, 25, 50, 90}).Draw(rt, "reserve"))}
		for i := 0; i < nIDs; i++ {
			if rapid.Bool().Draw(rt, "weighted") {
				cfg.Weights = append(cfg.Weights, ShareWeight{Identifier: fmt.Sprintf("id%d", i), Factor: float64(rapid.IntRange(1, 8).Draw(rt, "weight")) / 2})
			}
		}
		if rapid.Bool().Draw(rt, "prefix") {
			cfg.Weights = append(cfg.Weights, ShareWeight{Identifier: "id*", Factor: 3})
		}
		capOf := func(v []int64) qshare.Capacity {
			c := qshare.Capacity{}
			for i, n := range v {
				if n > 0 {
					c[typeName(i)] = n
				}
			}
			return c
		}
		e := New()
		must(rt, e.SetEnvironment(EnvironmentConfig{Name: "E", Limits: capOf(limits)}))
		must(rt, e.SetQueue(QueueConfig{Name: "Q", Environment: "E"}))
		must(rt, e.SetShare(ShareConfig{Queue: "Q", Name: QueueShare, Limits: capOf(limits), Strategy: qshare.StrategyReserve, FairShare: &cfg}))
		ref := newFairRef(cfg, limits, nIDs)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var now int64 // seconds
		var log []string
		steps := rapid.IntRange(1, 80).Draw(rt, "steps")
		for step := 0; step < steps; step++ {
			now++
			switch k := rapid.IntRange(0, 9).Draw(rt, "cmd"); {
			case k <= 4:
				id := fmt.Sprintf("j%03d", step)
				dem := make([]int64, nTypes)
				dem[rapid.IntRange(0, nTypes-1).Draw(rt, "type")] = int64(rapid.IntRange(1, 4).Draw(rt, "n"))
				ident := rapid.IntRange(0, nIDs-1).Draw(rt, "ident")
				prio := rapid.IntRange(0, 3).Draw(rt, "prio")
				created := base.Add(time.Duration(now-int64(rapid.IntRange(0, 1).Draw(rt, "tie"))) * time.Second)
				must(rt, e.Submit(JobSpec{ID: id, Queue: "Q", Share: QueueShare, Priority: prio, Created: created, Demand: capOf(dem), PreemptionRetries: -1, ShareIdentifier: fmt.Sprintf("id%d", ident)}))
				ref.jobs[id] = &fairRefJob{id: id, ident: ident, prio: prio, created: created.UnixNano(), dem: dem}
				log = append(log, fmt.Sprintf("submit %s id%d prio=%d dem=%v", id, ident, prio, dem))
			case k <= 6:
				var held []string
				for id, j := range ref.jobs {
					if j.holding {
						held = append(held, id)
					}
				}
				if len(held) == 0 {
					continue
				}
				sort.Strings(held)
				id := rapid.SampledFrom(held).Draw(rt, "finish")
				must(rt, e.Release(id, false))
				ref.ids[ref.jobs[id].ident].held -= sum(ref.jobs[id].dem)
				delete(ref.jobs, id)
				log = append(log, "finish "+id)
			case k == 7:
				var waiting []string
				for id, j := range ref.jobs {
					if !j.holding {
						waiting = append(waiting, id)
					}
				}
				if len(waiting) == 0 {
					continue
				}
				sort.Strings(waiting)
				id := rapid.SampledFrom(waiting).Draw(rt, "job")
				p := rapid.IntRange(0, 5).Draw(rt, "newprio")
				must(rt, e.SetPriority(id, p))
				ref.jobs[id].prio = p
				log = append(log, fmt.Sprintf("priority %s %d", id, p))
			default:
				now += int64(rapid.IntRange(0, 30).Draw(rt, "jump"))
				log = append(log, fmt.Sprintf("tick to %d", now))
			}
			at := base.Add(time.Duration(now) * time.Second)
			var got []string
			for _, d := range e.Schedule(at) {
				switch d.Kind {
				case DecisionStart:
					got = append(got, d.Job)
				case DecisionPreempt:
					rt.Fatalf("a fair-share queue preempted %s", d.Job)
				}
			}
			want := ref.schedule(at.UnixNano())
			if !reflect.DeepEqual(got, want) {
				rt.Fatalf("step %d: starts differ\nengine:    %v\nreference: %v\nlog:\n%s", step, got, want, strings.Join(log, "\n"))
			}
			log = append(log, "  -> "+strings.Join(got, " "))
			used := make([]int64, nTypes)
			for _, j := range ref.jobs {
				if j.holding {
					for t, n := range j.dem {
						used[t] += n
					}
				}
			}
			for t := range used {
				if used[t] > limits[t] {
					rt.Fatalf("step %d: %d of type %d used, above the environment's %d", step, used[t], t, limits[t])
				}
			}
		}
	})
}

func sum(v []int64) int64 {
	var n int64
	for _, x := range v {
		n += x
	}
	return n
}

type fairRefJob struct {
	id      string
	ident   int
	prio    int
	created int64
	dem     []int64
	holding bool
}

type fairRefID struct {
	weight, usage, rate float64
	held                int64
}

type fairRef struct {
	cfg    FairShareConfig
	decay  float64
	limits []int64
	ids    []*fairRefID
	jobs   map[string]*fairRefJob
	at     int64
}

func newFairRef(cfg FairShareConfig, limits []int64, n int) *fairRef {
	r := &fairRef{cfg: cfg, limits: limits, jobs: map[string]*fairRefJob{}, decay: float64(cfg.DecaySeconds)}
	if r.decay == 0 {
		r.decay = 600
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("id%d", i)
		w, wl := 1.0, -1
		exact := false
		for _, x := range cfg.Weights {
			if x.Identifier == name {
				w, exact = x.Factor, true
			}
		}
		if !exact {
			for _, x := range cfg.Weights {
				if p, ok := strings.CutSuffix(x.Identifier, "*"); ok && strings.HasPrefix(name, p) && len(p) > wl {
					w, wl = x.Factor, len(p)
				}
			}
		}
		r.ids = append(r.ids, &fairRefID{weight: w})
	}
	return r
}

// head is identifier i's best waiting job: priority, then creation, then ID.
func (r *fairRef) head(i int) *fairRefJob {
	var best *fairRefJob
	for _, j := range r.jobs {
		if j.ident != i || j.holding {
			continue
		}
		if best == nil || j.prio > best.prio || j.prio == best.prio && (j.created < best.created || j.created == best.created && j.id < best.id) {
			best = j
		}
	}
	return best
}

func (r *fairRef) schedule(now int64) []string {
	if r.at != 0 && now > r.at {
		k := math.Exp(-(float64(now-r.at) / 1e9) / r.decay)
		for _, id := range r.ids {
			id.usage = id.usage*k + id.rate*r.decay*(1-k)
		}
	}
	if now > r.at || r.at == 0 {
		r.at = now
	}
	var out []string
	for {
		var order []int
		for i := range r.ids {
			if r.head(i) != nil {
				order = append(order, i)
			}
		}
		sort.Slice(order, func(a, b int) bool {
			x, y := r.ids[order[a]], r.ids[order[b]]
			if x.usage != y.usage {
				return x.usage < y.usage
			}
			hx, hy := r.head(order[a]), r.head(order[b])
			if hx.created != hy.created {
				return hx.created < hy.created
			}
			return hx.id < hy.id
		})
		started := false
		for _, i := range order {
			h := r.head(i)
			free := append([]int64(nil), r.limits...)
			for _, j := range r.jobs {
				if j.holding {
					for t, n := range j.dem {
						free[t] -= n
					}
				}
			}
			active := 0
			for _, id := range r.ids {
				if id.held > 0 {
					active++
				}
			}
			fits := true
			for t, n := range h.dem {
				if n == 0 {
					continue
				}
				keep := int64(0)
				if r.ids[i].held > 0 && r.cfg.ComputeReservation > 0 {
					keep = int64(math.Floor(float64(r.limits[t]) * math.Pow(float64(r.cfg.ComputeReservation)/100, float64(active))))
				}
				if n > r.limits[t] || n > free[t]-keep {
					fits = false
				}
			}
			if !fits {
				continue
			}
			h.holding = true
			r.ids[i].held += sum(h.dem)
			out = append(out, h.id)
			started = true
			break
		}
		if !started {
			break
		}
	}
	for _, id := range r.ids {
		id.rate = float64(id.held) * id.weight
	}
	return out
}

// TestRebuildFairUsage: usage rebuilt from the intervals jobs held
// capacity is the usage the engine accumulated over the same history, pass
// by pass (to float precision), so that a restarted server orders the
// identifiers as the one before.
func TestRebuildFairUsage(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	setup := func() *Engine {
		e := New()
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(e.SetEnvironment(EnvironmentConfig{Name: "E", Limits: qshare.Capacity{"g": 4}}))
		must(e.SetQueue(QueueConfig{Name: "Q", Environment: "E"}))
		must(e.SetShare(ShareConfig{Queue: "Q", Name: QueueShare, Limits: qshare.Capacity{"g": 4}, Strategy: qshare.StrategyReserve,
			FairShare: &FairShareConfig{DecaySeconds: 300, Weights: []ShareWeight{{Identifier: "b", Factor: 0.5}}}}))
		return e
	}
	live := setup()
	spans := []FairInterval{}
	type run struct {
		id, ident  string
		n          int64
		start, end int
	}
	runs := []run{{"a1", "a", 2, 0, 400}, {"b1", "b", 1, 100, 700}, {"a2", "a", 1, 500, 0}}
	// In time order: the starts (each job starts at its submit) and the
	// ends.
	type step struct {
		t     int
		r     run
		start bool
	}
	var steps []step
	for _, r := range runs {
		steps = append(steps, step{r.start, r, true})
		if r.end > 0 {
			steps = append(steps, step{r.end, r, false})
		}
		sp := FairInterval{ShareIdentifier: r.ident, Instances: r.n, From: at(r.start)}
		if r.end > 0 {
			sp.To = at(r.end)
		}
		spans = append(spans, sp)
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].t < steps[j].t })
	for _, st := range steps {
		r := st.r
		if st.start {
			if err := live.Submit(JobSpec{ID: r.id, Queue: "Q", Share: QueueShare, Created: at(r.start), Demand: qshare.Capacity{"g": r.n}, ShareIdentifier: r.ident, PreemptionRetries: -1}); err != nil {
				t.Fatal(err)
			}
		} else if err := live.Release(r.id, false); err != nil {
			t.Fatal(err)
		}
		live.Schedule(at(st.t))
	}
	// Usage is as of the last pass (at 700, the last change).
	rebuilt := setup()
	if err := rebuilt.RebuildFairUsage("Q", spans, at(700)); err != nil {
		t.Fatal(err)
	}
	got, want := rebuilt.FairShare("Q"), live.FairShare("Q")
	if len(got) != 2 || len(want) != 2 {
		t.Fatalf("identifiers: rebuilt %+v, live %+v", got, want)
	}
	for i := range want {
		if got[i].ShareIdentifier != want[i].ShareIdentifier || math.Abs(got[i].Usage-want[i].Usage) > 1e-6*want[i].Usage {
			t.Errorf("identifier %d: rebuilt %+v, live %+v", i, got[i], want[i])
		}
	}
	if err := rebuilt.RebuildFairUsage("nope", nil, at(900)); qshare.ErrorCodeOf(err) != qshare.ENOTFOUND {
		t.Fatalf("RebuildFairUsage of an unknown queue: %v", err)
	}
}
