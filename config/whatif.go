package config

import (
	"fmt"
	"reflect"
	"slices"
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
//	plan.NAME=TYPE:COUNT@START/LENGTH[:share=[QUEUE/]SHARE][:warning=DURATION]
//	                                    a capacity plan (created, or replaced):
//	                                    COUNT instances of TYPE for share SHARE
//	                                    (the only quota share when omitted) from
//	                                    START (2026-12-01T00:00, a date, or
//	                                    RFC 3339; UTC unless it says) for LENGTH
//	                                    (14d, 36h, 90m); warning 10m unless given
//	plan.NAME=none                      removes the plan
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
	if kind == "plan" {
		return f.setPlan(rest, val)
	}
	name, field, ok := strings.Cut(rest, ".")
	if !ok || name == "" || field == "" {
		return fmt.Errorf("key %q must have the form env.NAME.FIELD, share.NAME.FIELD, queue.NAME.FIELD or plan.NAME", key)
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
		e, p, err := lookup(f.ServiceEnvironments, "serviceEnvironments", "service environment", name, func(e Environment) string { return e.Name })
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(field, "maxCapacity."):
			return f.setMaxCapacity(&e.CapacityLimits, p, field, val, origin)
		case field == "state":
			e.State = qshare.State(val)
			f.mark(p+".state", origin)
		default:
			return fmt.Errorf("unknown field %q of an environment: use maxCapacity.TYPE or state", field)
		}
	case "queue":
		q, p, err := lookup(f.JobQueues, "jobQueues", "job queue", name, func(q Queue) string { return q.Name })
		if err != nil {
			return err
		}
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
			return f.setMaxCapacity(&s.CapacityLimits, p, field, val, origin)
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
		return fmt.Errorf("key %q must start with env., share., queue. or plan.", key)
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

// lookup returns the last of xs called name and its path in the file
// (at[i], at naming the list), or an error that names what was looked for
// (a "job queue") and the names there are.
func lookup[T any](xs []T, at, what, name string, nameOf func(T) string) (*T, string, error) {
	i := -1
	for k := range xs {
		if nameOf(xs[k]) == name {
			i = k
		}
	}
	if i < 0 {
		return nil, "", fmt.Errorf("no %s %q (known: %s)", what, name, names(xs, nameOf))
	}
	return &xs[i], fmt.Sprintf("%s[%d]", at, i), nil
}

// setMaxCapacity applies the change maxCapacity.TYPE=val (field holds
// "maxCapacity.TYPE") to the limits at ls, those of the resource at path,
// and marks them set by origin; 0 removes the type's limit.
func (f *File) setMaxCapacity(ls *[]qshare.CapacityLimit, path, field, val string, origin Pos) error {
	n, err := parseInt(val)
	if err != nil {
		return err
	}
	*ls = setLimit(*ls, strings.TrimPrefix(field, "maxCapacity."), n)
	f.mark(path+".capacityLimits", origin)
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

// setPlan applies plan.NAME=VALUE (see WhatIf).
func (f *File) setPlan(name, val string) error {
	if err := qshare.ValidateName("plan.NAME", name); err != nil {
		return fmt.Errorf("%s", qshare.ErrorMessageOf(err))
	}
	i := slices.IndexFunc(f.CapacityPlans, func(p qshare.CapacityPlan) bool { return p.Name == name })
	if val == "none" {
		if i < 0 {
			return fmt.Errorf("plan.%s=none: the configuration has no capacity plan %s", name, name)
		}
		f.CapacityPlans = slices.Delete(f.CapacityPlans, i, i+1)
		return nil
	}
	const form = "write TYPE:COUNT@START/LENGTH[:share=SHARE][:warning=DURATION], for example ml.p5.48xlarge:16@2026-12-01T00:00/14d:share=QS1"
	// START may hold ':' (a time of day): the options begin at the first
	// ":share=" or ":warning=".
	spec, opts := val, ""
	for _, o := range []string{":share=", ":warning="} {
		if m := strings.Index(val, o); m >= 0 && m < len(spec) {
			spec, opts = val[:m], val[m+1:]
		}
	}
	typeCount, when, ok := strings.Cut(spec, "@")
	typ, count, ok2 := strings.Cut(typeCount, ":")
	start, length, ok3 := strings.Cut(when, "/")
	if !ok || !ok2 || !ok3 || typ == "" {
		return fmt.Errorf("plan.%s=%s: %s", name, val, form)
	}
	p := qshare.CapacityPlan{Name: name, InstanceType: typ}
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil {
		return fmt.Errorf("plan.%s: instance count %q is not an integer: %s", name, count, form)
	}
	p.InstanceCount = n
	if p.StartTime, err = ParseTime(start); err != nil {
		return fmt.Errorf("plan.%s: %v", name, err)
	}
	d, err := parseLength(length)
	if err != nil {
		return fmt.Errorf("plan.%s: length %v", name, err)
	}
	p.EndTime = p.StartTime.Add(d)
	share := ""
	for _, o := range strings.Split(opts, ":") {
		if o == "" {
			continue
		}
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "share":
			share = v
		case "warning":
			w, err := parseLength(v)
			if err != nil || w%time.Second != 0 {
				return fmt.Errorf("plan.%s: warning %q is not a whole number of seconds (10m, 600s)", name, v)
			}
			s := int64(w / time.Second)
			p.WarningSeconds = &s
		default:
			return fmt.Errorf("plan.%s: unknown option %q: use share= or warning=", name, k)
		}
	}
	if share == "" {
		names := f.ShareNames()
		if len(names) != 1 {
			return fmt.Errorf("plan.%s: say which share gets the plan (:share=[QUEUE/]SHARE); the configuration has %d quota shares", name, len(names))
		}
		share = names[0]
	}
	qi, si, err := f.findShare(share)
	if err != nil {
		return err
	}
	p.JobQueue, p.QuotaShare = f.JobQueues[qi].Name, f.JobQueues[qi].QuotaShares[si].Name
	if i >= 0 {
		f.CapacityPlans[i] = p
	} else {
		f.CapacityPlans = append(f.CapacityPlans, p)
	}
	return nil
}

// ParseTime reads an absolute time of the command line: RFC 3339
// (2026-12-01T00:00:00Z), or, in UTC, 2026-12-01T00:00:00, 2026-12-01T00:00
// or 2026-12-01.
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: write 2026-12-01T00:00 (UTC), 2026-12-01, or RFC 3339", s)
}

// parseLength reads a span: Nd (days) or a Go duration (36h, 90m).
func parseLength(s string) (time.Duration, error) { return ParseLength(s, 366) }

// ParseLength reads a length of time: Nd, a whole number of days from 0 to
// maxDays, or a Go duration (36h, 90m) not below 0. Its errors quote s and
// say what it should have been.
func ParseLength(s string, maxDays int64) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > maxDays {
			return 0, fmt.Errorf("%q is not a number of days from 0 to %d", s, maxDays)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration: write 14d, 36h or 90m", s)
	}
	return d, nil
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
	for _, p := range other.CapacityPlans {
		i := slices.IndexFunc(base.CapacityPlans, func(b qshare.CapacityPlan) bool { return b.Name == p.Name })
		if i < 0 || !reflect.DeepEqual(base.CapacityPlans[i], p) {
			out = append(out, fmt.Sprintf("plan %s: %d %s for %s/%s from %s to %s (warning %s)", p.Name, p.InstanceCount, p.InstanceType,
				p.JobQueue, p.QuotaShare, p.StartTime.UTC().Format(time.RFC3339), p.EndTime.UTC().Format(time.RFC3339), p.Warning()))
		}
	}
	for _, b := range base.CapacityPlans {
		if !slices.ContainsFunc(other.CapacityPlans, func(p qshare.CapacityPlan) bool { return p.Name == b.Name }) {
			out = append(out, "plan "+b.Name+": removed")
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
