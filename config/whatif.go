package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"qshare"
)

// WhatIf returns a copy of f with each KEY=VALUE change applied, validated
// as a whole; f itself is left untouched. The keys are:
//
//	env.ENV.maxCapacity.TYPE=N          an environment's limit of an instance type (0 removes it)
//	env.ENV.state=ENABLED|DISABLED
//	share.[QUEUE/]SHARE.maxCapacity.TYPE=N   a share's limit of an instance type (0 removes it)
//	share.[QUEUE/]SHARE.strategy=RESERVE|LEND|LEND_AND_BORROW
//	share.[QUEUE/]SHARE.borrowLimit=N   (-1 for unlimited; "none" removes it)
//	share.[QUEUE/]SHARE.inSharePreemption=ENABLED|DISABLED
//	share.[QUEUE/]SHARE.state=ENABLED|DISABLED
//	share.[QUEUE/]SHARE.minRunTime=DURATION  its minimum run time before preemption
//	                                    (10m, 1h30m, or seconds: 600; 0 removes it),
//	                                    kept as the tag qshare:minRunTimeSeconds
//	queue.QUEUE.priority=N
//	queue.QUEUE.state=ENABLED|DISABLED
//
// A share may be named without its queue when no other queue has a share
// of that name; share.*.FIELD=VALUE changes every quota share of every
// queue. Instance types may contain dots (ml.g5.xlarge): everything
// after "maxCapacity." is the type. A problem the change causes is reported
// at the change ("--what-if share.QS1.strategy=RESERVE").
func (f *File) WhatIf(changes []string, opts Options) (*File, error) {
	out := f.Clone()
	var probs []Problem
	for _, kv := range changes {
		if err := out.set(kv); err != nil {
			probs = append(probs, Problem{Pos: Pos{Origin: "--what-if " + kv}, Message: err.Error()})
		}
	}
	if len(probs) == 0 {
		probs = out.check(opts)
	}
	if len(probs) > 0 {
		sortProblems(probs)
		return nil, &Errors{Name: "configuration after --what-if", Problems: probs}
	}
	return out, nil
}

func (f *File) set(kv string) error {
	key, val, ok := strings.Cut(kv, "=")
	if !ok {
		return fmt.Errorf("%q is not KEY=VALUE: write for example share.QS1.strategy=RESERVE", kv)
	}
	kind, rest, _ := strings.Cut(key, ".")
	name, field, ok := strings.Cut(rest, ".")
	if !ok || name == "" || field == "" {
		return fmt.Errorf("key %q must have the form env.NAME.FIELD, share.NAME.FIELD or queue.NAME.FIELD", key)
	}
	if kind == "share" && name == "*" {
		names := f.ShareNames()
		if len(names) == 0 {
			return fmt.Errorf("share.* names no quota share: the configuration has none")
		}
		for _, n := range names {
			if err := f.setAt(kv, "share", n, field, val); err != nil {
				return err
			}
		}
		return nil
	}
	return f.setAt(kv, kind, name, field, val)
}

// setAt applies the change kv, read as kind.name.field=val.
func (f *File) setAt(kv, kind, name, field, val string) error {
	key, _, _ := strings.Cut(kv, "=")
	origin := Pos{Origin: "--what-if " + kv}
	switch kind {
	case "env":
		i, err := lookup(f.ServiceEnvironments, "service environment", name, func(e Environment) string { return e.Name })
		if err != nil {
			return err
		}
		e := &f.ServiceEnvironments[i]
		p := fmt.Sprintf("serviceEnvironments[%d]", i)
		switch {
		case strings.HasPrefix(field, "maxCapacity."):
			if err := setMaxCapacity(&e.CapacityLimits, field, val); err != nil {
				return err
			}
			f.mark(p+".capacityLimits", origin)
		case field == "state":
			e.State = qshare.State(val)
			f.mark(p+".state", origin)
		default:
			return fmt.Errorf("unknown field %q of an environment: use maxCapacity.TYPE or state", field)
		}
	case "queue":
		i, err := lookup(f.JobQueues, "job queue", name, func(q Queue) string { return q.Name })
		if err != nil {
			return err
		}
		q := &f.JobQueues[i]
		p := fmt.Sprintf("jobQueues[%d]", i)
		switch field {
		case "priority":
			n, err := parseInt(val)
			if err != nil {
				return err
			}
			q.Priority = &n
			f.mark(p+".priority", origin)
		case "state":
			q.State = qshare.State(val)
			f.mark(p+".state", origin)
		default:
			return fmt.Errorf("unknown field %q of a job queue: use priority or state", field)
		}
	case "share":
		qi, si, err := f.findShare(name)
		if err != nil {
			return err
		}
		s := &f.JobQueues[qi].QuotaShares[si]
		p := fmt.Sprintf("jobQueues[%d].quotaShares[%d]", qi, si)
		switch {
		case strings.HasPrefix(field, "maxCapacity."):
			if err := setMaxCapacity(&s.CapacityLimits, field, val); err != nil {
				return err
			}
			f.mark(p+".capacityLimits", origin)
		case field == "strategy":
			s.Strategy = qshare.Strategy(val)
			if s.Strategy != qshare.StrategyLendAndBorrow {
				s.BorrowLimit = nil // only LEND_AND_BORROW has one
			}
			f.mark(p+".resourceSharingConfiguration", origin)
		case field == "borrowLimit":
			if val == "none" {
				s.BorrowLimit = nil
			} else {
				n, err := parseInt(val)
				if err != nil {
					return err
				}
				s.BorrowLimit = &n
			}
			f.mark(p+".resourceSharingConfiguration", origin)
		case field == "inSharePreemption":
			s.InSharePreemption = qshare.State(val)
			f.mark(p+".preemptionConfiguration", origin)
		case field == "state":
			s.State = qshare.State(val)
			f.mark(p+".state", origin)
		case field == "minRunTime":
			d, err := parseSpan(val)
			if err != nil {
				return err
			}
			tags := make(map[string]string, len(s.Tags)+1)
			for k, v := range s.Tags {
				tags[k] = v
			}
			if d == 0 {
				delete(tags, qshare.TagMinRunTime)
			} else {
				tags[qshare.TagMinRunTime] = strconv.FormatInt(int64(d/time.Second), 10)
			}
			s.Tags = tags
			f.mark(p+".tags", origin)
		default:
			return fmt.Errorf("unknown field %q of a quota share: use maxCapacity.TYPE, strategy, borrowLimit, inSharePreemption, state or minRunTime", field)
		}
	default:
		return fmt.Errorf("key %q must start with env., share. or queue.", key)
	}
	return nil
}

// mark records that everything at or under path was set by origin.
func (f *File) mark(path string, origin Pos) {
	if f.pos == nil {
		f.pos = map[string]Pos{}
	}
	for k := range f.pos {
		if k == path || strings.HasPrefix(k, path+".") || strings.HasPrefix(k, path+"[") {
			f.pos[k] = origin
		}
	}
	f.pos[path] = origin
}

func (f *File) findShare(name string) (qi, si int, err error) {
	queue, share, qualified := strings.Cut(name, "/")
	if !qualified {
		share, queue = queue, ""
	}
	var found [][2]int
	for i, q := range f.JobQueues {
		if queue != "" && q.Name != queue {
			continue
		}
		for k, s := range q.QuotaShares {
			if s.Name == share {
				found = append(found, [2]int{i, k})
			}
		}
	}
	switch len(found) {
	case 1:
		return found[0][0], found[0][1], nil
	case 0:
		return 0, 0, fmt.Errorf("no quota share %q (known: %s)", name, strings.Join(f.ShareNames(), ", "))
	}
	return 0, 0, fmt.Errorf("quota share %q is in several queues: name it as QUEUE/%s", share, share)
}

// lookup returns the index of the last of xs called name, or an error that
// names what was looked for (a "job queue") and the names there are.
func lookup[T any](xs []T, what, name string, nameOf func(T) string) (int, error) {
	i := -1
	for k := range xs {
		if nameOf(xs[k]) == name {
			i = k
		}
	}
	if i < 0 {
		return 0, fmt.Errorf("no %s %q (known: %s)", what, name, names(xs, nameOf))
	}
	return i, nil
}

// setMaxCapacity applies the change maxCapacity.TYPE=val (field holds
// "maxCapacity.TYPE") to the limits at ls; 0 removes the type's limit.
func setMaxCapacity(ls *[]qshare.CapacityLimit, field, val string) error {
	n, err := parseInt(val)
	if err != nil {
		return err
	}
	*ls = setLimit(*ls, strings.TrimPrefix(field, "maxCapacity."), n)
	return nil
}

func setLimit(ls []qshare.CapacityLimit, unit string, n int64) []qshare.CapacityLimit {
	out := make([]qshare.CapacityLimit, 0, len(ls)+1)
	found := false
	for _, l := range ls {
		if l.CapacityUnit == unit {
			found = true
			if n == 0 {
				continue
			}
			l.MaxCapacity = n
		}
		out = append(out, l)
	}
	if !found && n != 0 {
		out = append(out, qshare.CapacityLimit{CapacityUnit: unit, MaxCapacity: n})
	}
	return out
}

// parseSpan reads a minimum run time: a Go duration of whole seconds (10m,
// 1h30m) or a number of seconds, from 0 to 7 days.
func parseSpan(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if n, nerr := strconv.ParseInt(s, 10, 64); nerr == nil {
		d, err = time.Duration(n)*time.Second, nil
		if n > qshare.MaxMinRunTimeSeconds {
			d = time.Duration(qshare.MaxMinRunTimeSeconds+1) * time.Second
		}
	}
	if err != nil || d < 0 || d%time.Second != 0 || d > time.Duration(qshare.MaxMinRunTimeSeconds)*time.Second {
		return 0, fmt.Errorf("minRunTime %q is not a duration of whole seconds from 0 to 168h (7 days): write for example 10m or 600", s)
	}
	return d, nil
}

func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

// Describe returns a short, stable account of the differences between two
// configurations (base and what-if), one line per changed field, for the
// simulator's --compare output.
func Describe(base, other *File) []string {
	var out []string
	for _, e := range other.ServiceEnvironments {
		b := base.Environment(e.Name)
		if b == nil {
			continue
		}
		out = append(out, diffLimits("env "+e.Name, b.CapacityLimits, e.CapacityLimits)...)
		if b.State != e.State {
			out = append(out, fmt.Sprintf("env %s state: %s -> %s", e.Name, stateOrEnabled(b.State), stateOrEnabled(e.State)))
		}
	}
	for _, q := range other.JobQueues {
		bq := base.Queue(q.Name)
		if bq == nil {
			continue
		}
		if bq.Priority != nil && q.Priority != nil && *bq.Priority != *q.Priority {
			out = append(out, fmt.Sprintf("queue %s priority: %d -> %d", q.Name, *bq.Priority, *q.Priority))
		}
		for _, s := range q.QuotaShares {
			b := bq.Share(s.Name)
			if b == nil {
				continue
			}
			who := "share " + q.Name + "/" + s.Name
			out = append(out, diffLimits(who, b.CapacityLimits, s.CapacityLimits)...)
			if b.Strategy != s.Strategy {
				out = append(out, fmt.Sprintf("%s strategy: %s -> %s", who, b.Strategy, s.Strategy))
			}
			if b.EffectiveBorrowLimit() != s.EffectiveBorrowLimit() {
				out = append(out, fmt.Sprintf("%s borrowLimit: %d -> %d", who, b.EffectiveBorrowLimit(), s.EffectiveBorrowLimit()))
			}
			if b.InSharePreemption != s.InSharePreemption {
				out = append(out, fmt.Sprintf("%s inSharePreemption: %s -> %s", who, b.InSharePreemption, s.InSharePreemption))
			}
			if stateOrEnabled(b.State) != stateOrEnabled(s.State) {
				out = append(out, fmt.Sprintf("%s state: %s -> %s", who, stateOrEnabled(b.State), stateOrEnabled(s.State)))
			}
			bm, _ := qshare.MinRunTime("tags", b.Tags)
			sm, _ := qshare.MinRunTime("tags", s.Tags)
			if bm != sm {
				out = append(out, fmt.Sprintf("%s minRunTime: %s -> %s", who, bm, sm))
			}
		}
	}
	return out
}

func diffLimits(who string, a, b []qshare.CapacityLimit) []string {
	la, lb := qshare.Limits(a), qshare.Limits(b)
	types := map[string]bool{}
	for t := range la {
		types[t] = true
	}
	for t := range lb {
		types[t] = true
	}
	keys := make([]string, 0, len(types))
	for t := range types {
		keys = append(keys, t)
	}
	sort.Strings(keys)
	var out []string
	for _, t := range keys {
		if la[t] != lb[t] {
			out = append(out, fmt.Sprintf("%s maxCapacity %s: %d -> %d", who, t, la[t], lb[t]))
		}
	}
	return out
}
