package engine

import (
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"

	"qshare"
)

// oneShareEngine is an engine with environment E of n instances of type
// t, queue Q on it, and share S (LEND) that owns all of E; must fails the
// test on an error.
func oneShareEngine(t *testing.T, n int64) (e *Engine, must func(error)) {
	t.Helper()
	must = func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	e = New()
	must(e.SetEnvironment(EnvironmentConfig{Name: "E", Limits: qshare.Capacity{"t": n}}))
	must(e.SetQueue(QueueConfig{Name: "Q", Environment: "E"}))
	must(e.SetShare(ShareConfig{Queue: "Q", Name: "S", Limits: qshare.Capacity{"t": n}, Strategy: qshare.StrategyLend, BorrowLimit: -1}))
	return e, must
}

// TestVersionWrap changes one job's priority more than 1<<verBits times
// while enough other jobs wait that its old run-queue entries are not
// compacted away in between: an old entry whose version bits alias the
// current ones would show the job twice, or in its old place.
func TestVersionWrap(t *testing.T) {
	e, must := oneShareEngine(t, 1<<20)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const others = 200_000
	for i := range others {
		must(e.Submit(JobSpec{ID: fmt.Sprintf("j%06d", i), Queue: "Q", Share: "S", Priority: 5, Created: t0.Add(time.Duration(i+1) * time.Second), Demand: qshare.Capacity{"t": 1}, PreemptionRetries: -1}))
	}
	must(e.Submit(JobSpec{ID: "a", Queue: "Q", Share: "S", Priority: 5, Created: t0, Demand: qshare.Capacity{"t": 1}, PreemptionRetries: -1}))
	// Two version steps per change; end at priority 0, behind the others,
	// after more than 1<<verBits steps but before the stale entries exceed
	// the live ones (which compacts the queue): the entries pushed
	// 1<<verBits steps ago are still there.
	n := 150_001
	for i := 0; i < n; i++ {
		p := 9 * (i % 2)
		must(e.SetPriority("a", p))
		if i%40_000 == 0 || i > n-3 || i > 1<<verBits/2-3 && i < 1<<verBits/2+3 {
			want := "a"
			if p == 0 {
				want = "j000000"
			}
			if h := e.Shares("Q")[0].Head; h != want {
				t.Fatalf("change %d to priority %d: head %s, want %s", i, p, h, want)
			}
		}
	}
	if st := e.Stats(); st.Runnable != others+1 {
		t.Fatalf("runnable %d, want %d", st.Runnable, others+1)
	}
	// Exactly one entry of a passes for current, at the bottom.
	q := &e.queues["Q"].shares["S"].runq
	a := e.jobs.get("a")
	valid := 0
	for i := range q.h {
		if q.h[i].slot == a.slot && q.valid(&q.h[i]) {
			valid++
		}
	}
	if valid != 1 || a.prio != 0 {
		t.Fatalf("a (priority %d) has %d current entries, want 1", a.prio, valid)
	}
}

// TestJobLayout keeps the job record at 256 bytes, its pointers in its
// first two cache lines and what a head's evaluation reads in its first
// three (see job).
func TestJobLayout(t *testing.T) {
	var j job
	if n := unsafe.Sizeof(j); n != 256 {
		t.Errorf("job is %d bytes, want 256", n)
	}
	for name, off := range map[string]uintptr{
		"id": unsafe.Offsetof(j.id), "sh": unsafe.Offsetof(j.sh), "reserver": unsafe.Offsetof(j.reserver),
		"resState": unsafe.Offsetof(j.resState), "reason": unsafe.Offsetof(j.reason),
		"why.o": unsafe.Offsetof(j.why) + unsafe.Offsetof(j.why.o),
	} {
		if off >= 128 {
			t.Errorf("pointer job.%s at offset %d, beyond the first two cache lines", name, off)
		}
	}
	for name, off := range map[string]uintptr{
		"dem0": unsafe.Offsetof(j.dem0), "ndem": unsafe.Offsetof(j.ndem), "started": unsafe.Offsetof(j.started),
	} {
		if off >= 192 {
			t.Errorf("job.%s at offset %d, beyond the first three cache lines", name, off)
		}
	}
}

// TestSlotReuse: a forgotten job's slot is not reused while a run-queue
// entry still names it, and is reused (last freed, first reused) once the
// entry is gone.
func TestSlotReuse(t *testing.T) {
	e, must := oneShareEngine(t, 1)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	submit := func(id string, prio int) {
		t.Helper()
		must(e.Submit(JobSpec{ID: id, Queue: "Q", Share: "S", Priority: prio, Created: t0, Demand: qshare.Capacity{"t": 1}, PreemptionRetries: -1}))
	}
	submit("a", 9)
	submit("b", 5)
	slotA := e.jobs.get("a").slot
	must(e.Stopping("a")) // a's entry stays in the heap, stale
	submit("c", 1)
	if e.jobs.get("c").slot == slotA {
		t.Fatal("c took the slot of a, which a run-queue entry still names")
	}
	if ds := e.Schedule(t0); len(ds) != 2 || ds[0].Job != "b" || ds[0].Kind != DecisionStart || ds[1].Job != "c" {
		t.Fatalf("decisions %+v, want b started and c waiting", ds)
	}
	submit("d", 1) // a's entry was dropped at the top: its slot is free
	if got := e.jobs.get("d").slot; got != slotA {
		t.Fatalf("d in slot %d, want a's freed slot %d", got, slotA)
	}
	if _, ok := e.Job("a"); ok {
		t.Fatal("a is still known")
	}
	if v, _ := e.Job("d"); v.ID != "d" || v.State != JobRunnable {
		t.Fatalf("d: %+v", v)
	}
	if e.jobs.count != 3 {
		t.Fatalf("%d jobs indexed, want 3 (b, c, d)", e.jobs.count)
	}
}

// TestReleaseManySubmitMany checks that ReleaseMany and SubmitMany have the
// effect of one Release or Submit per job, in order: two engines fed the
// same mixed churn, one called job by job and one in batches (of more than
// one prefetch group; releases with and without requeue), decide the same
// at every step. An unknown ID stops ReleaseMany there, with ENOTFOUND,
// after the jobs before it; a duplicate ID or an unknown share stops
// SubmitMany likewise. The batch engine's passes go through
// AppendSchedule into the slice of its last pass, after an entry that
// must be left as it is.
func TestReleaseManySubmitMany(t *testing.T) {
	a, b := newBenchWorld(5_000, true), newBenchWorld(5_000, true)
	sentinel := Decision{Kind: DecisionWait, Job: "not-a-job", Reason: "kept"}
	var buf []Decision
	for step := range 40 {
		k := 1 + step*7 // 1 to 274 jobs: one group, several, and partial ones
		requeue := step%3 == 0
		ids := make([]string, 0, k)
		for range min(k, a.running.Len()) {
			i := a.rng.IntN(a.running.Len())
			ids = append(ids, a.running.RemoveAt(i))
			b.running.RemoveAt(i)
		}
		for _, id := range ids {
			if err := a.e.Release(id, requeue); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := b.e.ReleaseMany(ids, requeue); n != len(ids) || err != nil {
			t.Fatalf("step %d: ReleaseMany = %d, %v; want %d, nil", step, n, err, len(ids))
		}
		specs := make([]JobSpec, k)
		for x := range specs {
			specs[x] = a.spec(a.rng.IntN(len(a.shares)))
			if err := a.e.Submit(specs[x]); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := b.e.SubmitMany(specs); n != k || err != nil {
			t.Fatalf("step %d: SubmitMany = %d, %v; want %d, nil", step, n, err, k)
		}
		// b passes its last decisions' slice back to AppendSchedule, after
		// an entry that must stay as it is.
		da := a.e.Schedule(a.clock)
		buf = b.e.AppendSchedule(append(buf[:0], sentinel), a.clock)
		if !reflect.DeepEqual(buf[0], sentinel) {
			t.Fatalf("step %d: AppendSchedule changed what dst held: %v", step, buf[0])
		}
		db := buf[1:]
		if len(da) != len(db) || len(da) > 0 && !reflect.DeepEqual(da, db) {
			t.Fatalf("step %d: decisions differ:\n%v\n%v", step, da, db)
		}
		a.apply(da)
		b.apply(db)
		if !reflect.DeepEqual(a.e.Stats(), b.e.Stats()) {
			t.Fatalf("step %d: stats differ: %+v, %+v", step, a.e.Stats(), b.e.Stats())
		}
	}
	ids := []string{a.running.At(0), a.running.At(1), "no-such-job", a.running.At(2)}
	n, err := b.e.ReleaseMany(ids, false)
	if n != 2 || qshare.ErrorCodeOf(err) != qshare.ENOTFOUND {
		t.Fatalf("ReleaseMany with an unknown ID = %d, %v; want 2, ENOTFOUND", n, err)
	}
	if b.e.jobs.get(ids[0]) != nil || b.e.jobs.get(ids[1]) != nil || b.e.jobs.get(ids[3]) == nil {
		t.Fatal("ReleaseMany did not release exactly the jobs before the unknown one")
	}
	for _, bad := range []struct {
		spec JobSpec
		code qshare.ErrorCode
	}{
		{JobSpec{ID: ids[3], Queue: "queue00", Share: "share00", Demand: qshare.Capacity{benchTypes[0]: 1}}, qshare.ECONFLICT},
		{JobSpec{ID: "new-b", Queue: "queue00", Share: "no-such-share", Demand: qshare.Capacity{benchTypes[0]: 1}}, qshare.ENOTFOUND},
		{JobSpec{ID: "new-c", Queue: "no-such-queue", Share: "share00", Demand: qshare.Capacity{benchTypes[0]: 1}}, qshare.ENOTFOUND},
	} {
		id := "ok-" + bad.spec.ID
		specs := []JobSpec{{ID: id, Queue: "queue01", Share: "share01", Demand: qshare.Capacity{benchTypes[0]: 1}}, bad.spec, {ID: id + "-after", Queue: "queue01", Share: "share01", Demand: qshare.Capacity{benchTypes[0]: 1}}}
		n, err := b.e.SubmitMany(specs)
		if n != 1 || qshare.ErrorCodeOf(err) != bad.code {
			t.Fatalf("SubmitMany with %+v = %d, %v; want 1, %v", bad.spec, n, err, bad.code)
		}
		if b.e.jobs.get(id) == nil || b.e.jobs.get(id+"-after") != nil {
			t.Fatal("SubmitMany did not submit exactly the jobs before the failing one")
		}
	}
}

// apply carries out a pass's decisions as benchWorld.schedule does.
func (w *benchWorld) apply(ds []Decision) {
	for _, x := range ds {
		switch x.Kind {
		case DecisionStart:
			w.running.Add(x.Job)
		case DecisionPreempt:
			if err := w.e.Release(x.Job, !x.Final); err != nil {
				panic(err)
			}
			w.running.Remove(x.Job)
		}
	}
}
