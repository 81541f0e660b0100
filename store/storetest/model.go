package storetest

import (
	"cmp"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"qshare"
	"qshare/store"
)

// model is the obviously correct reference a store is compared with: maps
// keyed as the store.Change documentation says, changed exactly as Commit
// must change the store.
type model struct {
	envs     map[string]qshare.ServiceEnvironment
	policies map[string]qshare.SchedulingPolicy
	queues   map[string]qshare.JobQueue
	shares   map[store.ShareKey]qshare.QuotaShare
	plans    map[string]qshare.CapacityPlan
	jobs     map[string]qshare.Job
}

func newModel() *model {
	return &model{
		envs:     map[string]qshare.ServiceEnvironment{},
		policies: map[string]qshare.SchedulingPolicy{},
		queues:   map[string]qshare.JobQueue{},
		shares:   map[store.ShareKey]qshare.QuotaShare{},
		plans:    map[string]qshare.CapacityPlan{},
		jobs:     map[string]qshare.Job{},
	}
}

// apply changes the model as a successful Commit of c changes a store: puts
// first (a job's put is ignored if its Version is lower than the stored
// one's), then deletes.
func (m *model) apply(c *store.Change) {
	for _, v := range c.PutEnvironments {
		m.envs[v.Name] = v
	}
	for _, v := range c.PutPolicies {
		m.policies[v.Name] = v
	}
	for _, v := range c.PutQueues {
		m.queues[v.Name] = v
	}
	for _, v := range c.PutShares {
		m.shares[store.ShareKey{Queue: v.JobQueue, Name: v.Name}] = v
	}
	for _, v := range c.PutPlans {
		m.plans[v.Name] = v
	}
	for _, v := range c.PutJobs {
		if old, ok := m.jobs[v.ID]; ok && v.Version < old.Version {
			continue
		}
		m.jobs[v.ID] = v
	}
	deleteKeys(m.envs, c.DeleteEnvironments)
	deleteKeys(m.policies, c.DeletePolicies)
	deleteKeys(m.queues, c.DeleteQueues)
	deleteKeys(m.shares, c.DeleteShares)
	deleteKeys(m.plans, c.DeletePlans)
	deleteKeys(m.jobs, c.DeleteJobs)
}

// deleteKeys deletes every key of keys from m.
func deleteKeys[K comparable, V any](m map[K]V, keys []K) {
	for _, k := range keys {
		delete(m, k)
	}
}

// sortedJobs returns the model's jobs in the order Load must return them.
func (m *model) sortedJobs() []qshare.Job {
	js := make([]qshare.Job, 0, len(m.jobs))
	for _, j := range m.jobs {
		js = append(js, j)
	}
	slices.SortFunc(js, func(a, b qshare.Job) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return js
}

// check fails t unless got holds exactly what the model holds, with jobs in
// the order Load promises. Records are compared field by field, with the
// normalisations store.Store allows (see equalValues).
func (m *model) check(t fataler, got *store.State) {
	t.Helper()
	var problems []string
	problems = append(problems, checkKeyed(got.Environments, m.envs, func(v qshare.ServiceEnvironment) string { return v.Name }, "environment")...)
	problems = append(problems, checkKeyed(got.Policies, m.policies, func(v qshare.SchedulingPolicy) string { return v.Name }, "policy")...)
	problems = append(problems, checkKeyed(got.Queues, m.queues, func(v qshare.JobQueue) string { return v.Name }, "queue")...)
	problems = append(problems, checkKeyed(got.Shares, m.shares, func(v qshare.QuotaShare) store.ShareKey {
		return store.ShareKey{Queue: v.JobQueue, Name: v.Name}
	}, "share")...)
	problems = append(problems, checkKeyed(got.Plans, m.plans, func(v qshare.CapacityPlan) string { return v.Name }, "capacity plan")...)
	if !slices.IsSortedFunc(got.Plans, func(a, b qshare.CapacityPlan) int { return cmp.Compare(a.Name, b.Name) }) {
		problems = append(problems, "capacity plans do not come in name order")
	}
	want := m.sortedJobs()
	if len(got.Jobs) != len(want) {
		problems = append(problems, fmt.Sprintf("Load returned %d jobs, want %d", len(got.Jobs), len(want)))
	} else {
		for i := range want {
			if got.Jobs[i].ID != want[i].ID {
				problems = append(problems, fmt.Sprintf("job #%d is %q, want %q (jobs must come in CreatedAt order, ties by ID)", i, got.Jobs[i].ID, want[i].ID))
				break
			}
			if d := diff(want[i], got.Jobs[i]); d != "" {
				problems = append(problems, fmt.Sprintf("job %q: %s", want[i].ID, d))
			}
		}
	}
	if len(problems) > 10 {
		problems = append(problems[:10], fmt.Sprintf("... and %d more", len(problems)-10))
	}
	if len(problems) > 0 {
		t.Fatalf("the store does not hold what was committed:\n  %s", strings.Join(problems, "\n  "))
	}
}

func checkKeyed[K comparable, V any](got []V, want map[K]V, key func(V) K, kind string) []string {
	var problems []string
	seen := map[K]bool{}
	for _, g := range got {
		k := key(g)
		if seen[k] {
			problems = append(problems, fmt.Sprintf("%s %v returned twice", kind, k))
			continue
		}
		seen[k] = true
		w, ok := want[k]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s %v returned but not expected", kind, k))
			continue
		}
		if d := diff(w, g); d != "" {
			problems = append(problems, fmt.Sprintf("%s %v: %s", kind, k, d))
		}
	}
	for k := range want {
		if !seen[k] {
			problems = append(problems, fmt.Sprintf("%s %v missing", kind, k))
		}
	}
	sort.Strings(problems)
	return problems
}

// fataler is what check needs of a test: *testing.T and *rapid.T both have it.
type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

var timeType = reflect.TypeFor[time.Time]()

// diff describes the first difference between want and got, or returns ""
// if they are equal up to the normalisations store.Store allows: an empty
// slice or map equals a nil one, and times are equal if they are the same
// instant. Everything else must match exactly, including a nil pointer
// versus a pointer to zero.
func diff(want, got any) string {
	return diffValues("", reflect.ValueOf(want), reflect.ValueOf(got))
}

func diffValues(path string, w, g reflect.Value) string {
	if w.Type() == timeType {
		tw, tg := w.Interface().(time.Time), g.Interface().(time.Time)
		if !tw.Equal(tg) {
			return fmt.Sprintf("%s: got time %v, want %v", orTop(path), tg, tw)
		}
		return ""
	}
	switch w.Kind() {
	case reflect.Pointer:
		if w.IsNil() || g.IsNil() {
			if w.IsNil() != g.IsNil() {
				return fmt.Sprintf("%s: got %s, want %s", orTop(path), nilness(g), nilness(w))
			}
			return ""
		}
		return diffValues(path, w.Elem(), g.Elem())
	case reflect.Struct:
		for i := 0; i < w.NumField(); i++ {
			if d := diffValues(path+"."+w.Type().Field(i).Name, w.Field(i), g.Field(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Slice:
		if w.Len() != g.Len() {
			return fmt.Sprintf("%s: got %d elements, want %d", orTop(path), g.Len(), w.Len())
		}
		for i := 0; i < w.Len(); i++ {
			if d := diffValues(fmt.Sprintf("%s[%d]", path, i), w.Index(i), g.Index(i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Map:
		if w.Len() != g.Len() {
			return fmt.Sprintf("%s: got %d entries, want %d", orTop(path), g.Len(), w.Len())
		}
		iter := w.MapRange()
		for iter.Next() {
			gv := g.MapIndex(iter.Key())
			if !gv.IsValid() {
				return fmt.Sprintf("%s: key %v missing", orTop(path), iter.Key())
			}
			if d := diffValues(fmt.Sprintf("%s[%v]", path, iter.Key()), iter.Value(), gv); d != "" {
				return d
			}
		}
		return ""
	default:
		if !w.Equal(g) {
			return fmt.Sprintf("%s: got %#v, want %#v", orTop(path), g.Interface(), w.Interface())
		}
		return ""
	}
}

func orTop(path string) string {
	if path == "" {
		return "value"
	}
	return strings.TrimPrefix(path, ".")
}

func nilness(v reflect.Value) string {
	if v.IsNil() {
		return "nil"
	}
	return "non-nil"
}

// zeroFields lists the fields of v, recursively, that hold their zero value
// (an empty slice or map counts as zero). The suite's full fixtures must
// have none, so that a field added to a domain type later and not kept by a
// store makes the round-trip test fail instead of passing unnoticed.
func zeroFields(v any) []string {
	var out []string
	walkZero("", reflect.ValueOf(v), &out)
	return out
}

func walkZero(path string, v reflect.Value, out *[]string) {
	if v.Type() == timeType {
		if v.Interface().(time.Time).IsZero() {
			*out = append(*out, orTop(path))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			*out = append(*out, orTop(path))
			return
		}
		walkZero(path, v.Elem(), out)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			walkZero(path+"."+v.Type().Field(i).Name, v.Field(i), out)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			*out = append(*out, orTop(path))
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			walkZero(fmt.Sprintf("%s[%d]", path, i), v.Index(i), out)
		}
	case reflect.Map:
		if v.Len() == 0 {
			*out = append(*out, orTop(path))
		}
	default:
		if v.IsZero() {
			*out = append(*out, orTop(path))
		}
	}
}
