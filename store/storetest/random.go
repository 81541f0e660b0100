package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"qshare/store"
)

// testRandom commits random sequences of changes over a few keys of every
// kind, so that puts, replacements, deletes, the version rule and reopens
// interleave in ways the hand-written tests do not, and compares the store
// with the model after every step.
func testRandom(t *testing.T, h *harness) {
	keys := []string{"a", "b", "c"}
	times := []time.Time{{}, base, base.Add(time.Nanosecond), base.UTC().Add(-time.Hour)}
	rapid.Check(t, func(rt *rapid.T) {
		h.reset(rt)
		steps := rapid.IntRange(1, 12).Draw(rt, "steps")
		for step := range steps {
			if rapid.IntRange(0, 9).Draw(rt, "reopen") == 0 {
				h.reopen()
			}
			c := &store.Change{}
			for range rapid.IntRange(0, 4).Draw(rt, "puts") {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				n := rapid.IntRange(0, 99).Draw(rt, "value")
				switch rapid.IntRange(0, 4).Draw(rt, "kind") {
				case 0:
					e := FullEnvironment(k)
					e.CapacityLimits[0].MaxCapacity = int64(n)
					c.PutEnvironments = append(c.PutEnvironments, e)
				case 1:
					p := FullPolicy(k)
					p.Tags = map[string]string{"n": fmt.Sprint(n)}
					c.PutPolicies = append(c.PutPolicies, p)
				case 2:
					q := FullQueue(k)
					q.Priority = n
					c.PutQueues = append(c.PutQueues, q)
				case 3:
					s := FullShare(rapid.SampledFrom(keys).Draw(rt, "queue"), k)
					s.BorrowLimit = int64(n)
					c.PutShares = append(c.PutShares, s)
				case 4:
					j := FullJob(k, rapid.SampledFrom(times).Draw(rt, "created"))
					j.Version = int64(rapid.IntRange(0, 3).Draw(rt, "version"))
					j.Priority = n
					c.PutJobs = append(c.PutJobs, j)
				}
			}
			for range rapid.IntRange(0, 2).Draw(rt, "deletes") {
				k := rapid.SampledFrom(keys).Draw(rt, "key")
				switch rapid.IntRange(0, 4).Draw(rt, "kind") {
				case 0:
					c.DeleteEnvironments = append(c.DeleteEnvironments, k)
				case 1:
					c.DeletePolicies = append(c.DeletePolicies, k)
				case 2:
					c.DeleteQueues = append(c.DeleteQueues, k)
				case 3:
					c.DeleteShares = append(c.DeleteShares, store.ShareKey{Queue: rapid.SampledFrom(keys).Draw(rt, "queue"), Name: k})
				case 4:
					c.DeleteJobs = append(c.DeleteJobs, k)
				}
			}
			if err := h.s.Commit(context.Background(), c); err != nil {
				rt.Fatalf("step %d: Commit: %v", step, err)
			}
			h.m.apply(c)
			st, err := h.s.Load(context.Background())
			if err != nil {
				rt.Fatalf("step %d: Load: %v", step, err)
			}
			h.m.check(rt, st)
		}
	})
}

// reset empties the store and the model, for the next random case.
func (h *harness) reset(t fataler) {
	t.Helper()
	st, err := h.s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	c := &store.Change{}
	for _, v := range st.Environments {
		c.DeleteEnvironments = append(c.DeleteEnvironments, v.Name)
	}
	for _, v := range st.Policies {
		c.DeletePolicies = append(c.DeletePolicies, v.Name)
	}
	for _, v := range st.Queues {
		c.DeleteQueues = append(c.DeleteQueues, v.Name)
	}
	for _, v := range st.Shares {
		c.DeleteShares = append(c.DeleteShares, store.ShareKey{Queue: v.JobQueue, Name: v.Name})
	}
	for _, v := range st.Jobs {
		c.DeleteJobs = append(c.DeleteJobs, v.ID)
	}
	if err := h.s.Commit(context.Background(), c); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	h.m = newModel()
}
