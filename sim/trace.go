package sim

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"qshare"
	"qshare/config"
)

// Job is one job of a trace.
type Job struct {
	ID string
	// Submit is when the job is submitted, from the start of the run.
	Submit time.Duration
	// Duration is the work the job does once started (its run time when
	// it is never preempted).
	Duration time.Duration
	Queue    string
	Share    string
	Priority int
	// Demand is the capacity the job needs, all or nothing.
	Demand qshare.Capacity
	// PreemptionRetries is preemptionRetriesBeforeTermination; -1 means unlimited.
	PreemptionRetries int
}

// RowError is a trace row that cannot be used.
type RowError struct {
	Line    int
	Message string
}

// Error renders "line N: message".
func (e RowError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Message) }

// TraceError lists the bad rows of a trace. It unwraps to an EINVALID
// *qshare.Error.
type TraceError struct {
	Name string
	Rows []RowError
	// More counts bad rows beyond those listed.
	More int
}

// Error lists the bad rows.
func (e *TraceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s has %d bad rows (use --skip-bad-rows to run without them):", e.Name, len(e.Rows)+e.More)
	for _, r := range e.Rows {
		b.WriteString("\n  ")
		b.WriteString(r.Error())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "\n  ... and %d more", e.More)
	}
	return b.String()
}

// Unwrap returns the problem as an EINVALID *qshare.Error.
func (e *TraceError) Unwrap() error { return &qshare.Error{Code: qshare.EINVALID, Message: e.Error()} }

// TraceOptions tune the trace readers.
type TraceOptions struct {
	// Name names the trace in messages.
	Name string
	// SkipBadRows drops unusable rows (they are still returned as
	// RowErrors) instead of failing.
	SkipBadRows bool
}

const maxListedRows = 50

// ReadTrace reads a CSV trace with a header row. Columns may come in any
// order and unknown ones are ignored:
//
//	job_id, submit_s, duration_s, quota_share, instance_type, instance_count
//	optional: priority (default 0), job_queue (default: the only queue of
//	cfg), preemption_retries (default: unlimited)
//
// A job that needs several instance types has one row per type, with the
// same job_id and the same other fields. Lines that start with # are
// comments. Every row is checked against cfg
// (its queue and share must exist). The jobs come back sorted by submit
// time, ties in file order. Bad rows make it fail with a *TraceError unless
// opts.SkipBadRows; the skipped rows are returned either way.
func ReadTrace(r io.Reader, cfg *config.File, opts TraceOptions) ([]Job, []RowError, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.Comment = '#'
	header, err := cr.Read()
	if err != nil {
		return nil, nil, qshare.Errorf(qshare.EINVALID, "%s: cannot read the header row: %v", opts.Name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	var missing []string
	for _, c := range []string{"job_id", "submit_s", "duration_s", "quota_share", "instance_type", "instance_count"} {
		if _, ok := col[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return nil, nil, qshare.Errorf(qshare.EINVALID, "%s: the header lacks column(s) %s; a trace needs job_id, submit_s, duration_s, quota_share, instance_type, instance_count (and may have priority, job_queue, preemption_retries)",
			opts.Name, strings.Join(missing, ", "))
	}
	res := newResolver(cfg)
	b := newBuilder(opts)
	err = b.records(cr, func(rec []string, line int) {
		get := func(name string) string {
			i, ok := col[name]
			if !ok || i >= len(rec) {
				return ""
			}
			return strings.TrimSpace(rec[i])
		}
		j := Job{ID: get("job_id"), PreemptionRetries: -1}
		var probs []string
		if j.ID == "" {
			probs = append(probs, "job_id is empty")
		}
		probs = times(&j, get("submit_s"), get("duration_s"), probs)
		typ := get("instance_type")
		if typ == "" {
			probs = append(probs, "instance_type is empty")
		}
		n, err := strconv.ParseInt(get("instance_count"), 10, 64)
		if err != nil || n < 1 {
			probs = append(probs, fmt.Sprintf("instance_count %q is not a whole number of at least 1", get("instance_count")))
		}
		j.Demand = qshare.Capacity{typ: n}
		if p := get("priority"); p != "" {
			v, err := strconv.ParseInt(p, 10, 64)
			if err != nil || qshare.ValidatePriority("priority", v) != nil {
				probs = append(probs, fmt.Sprintf("priority %q is not an integer from 0 to 9999", p))
			}
			j.Priority = int(v)
		}
		if p := get("preemption_retries"); p != "" {
			v, err := strconv.Atoi(p)
			if err != nil || v < 0 {
				probs = append(probs, fmt.Sprintf("preemption_retries %q is not a whole number", p))
			}
			j.PreemptionRetries = v
		}
		j.Queue, j.Share = get("job_queue"), get("quota_share")
		if b.settle(res, &j, line, probs) {
			b.add(j, line)
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return b.finish()
}

// times parses a row's submit_s and duration_s into j, adding to probs
// what is wrong with them.
func times(j *Job, submit, duration string, probs []string) []string {
	var err1, err2 error
	j.Submit, err1 = seconds(submit, "submit_s")
	j.Duration, err2 = seconds(duration, "duration_s")
	for _, e := range []error{err1, err2} {
		if e != nil {
			probs = append(probs, e.Error())
		}
	}
	return probs
}

func seconds(s, name string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > 1e9*86400 {
		return 0, fmt.Errorf("%s %q is not a number of seconds of 0 or more", name, s)
	}
	return time.Duration(math.Round(f * 1e9)), nil
}

// resolver checks a row's queue and share against the configuration.
type resolver struct {
	cfg      *config.File
	defQueue string
}

func newResolver(cfg *config.File) *resolver {
	r := &resolver{cfg: cfg}
	if len(cfg.JobQueues) == 1 {
		r.defQueue = cfg.JobQueues[0].Name
	}
	return r
}

func (r *resolver) resolve(j *Job) string {
	if j.Queue == "" {
		if r.defQueue == "" {
			return "job_queue is empty, and the configuration has several queues: name one"
		}
		j.Queue = r.defQueue
	}
	q := r.cfg.Queue(j.Queue)
	if q == nil {
		return fmt.Sprintf("job_queue %q is not in the configuration", j.Queue)
	}
	if j.Share == "" {
		return "quota_share is empty"
	}
	if p := r.cfg.Policy(q.PolicyName()); p != nil && p.QuotaSharePolicy == nil {
		return "" // a fair-share queue: the column is the share identifier
	}
	if q.Share(j.Share) == nil {
		return fmt.Sprintf("quota_share %q is not a share of queue %s", j.Share, j.Queue)
	}
	return ""
}

// builder gathers jobs (merging the rows of multi-type jobs) and bad rows.
type builder struct {
	opts  TraceOptions
	jobs  []Job
	index map[string]int
	rows  []RowError
	more  int
}

func newBuilder(opts TraceOptions) *builder {
	if opts.Name == "" {
		opts.Name = "trace"
	}
	return &builder{opts: opts, index: map[string]int{}}
}

func (b *builder) bad(line int, msg string) {
	if len(b.rows) < maxListedRows || b.opts.SkipBadRows {
		b.rows = append(b.rows, RowError{Line: line, Message: msg})
	} else {
		b.more++
	}
}

// records calls each with every record of cr and the line it starts on.
// A record the CSV reader cannot parse is a bad row, and reading goes on;
// any other read error ends it and is returned.
func (b *builder) records(cr *csv.Reader, each func(rec []string, line int)) error {
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				b.bad(pe.Line, pe.Err.Error())
				continue
			}
			return err
		}
		line, _ := cr.FieldPos(0)
		each(rec, line)
	}
}

// settle resolves j's queue and share once the row's own fields are good
// (probs is empty), and reports the row as bad if anything is wrong. It
// returns whether j is good.
func (b *builder) settle(res *resolver, j *Job, line int, probs []string) bool {
	if len(probs) == 0 {
		if msg := res.resolve(j); msg != "" {
			probs = append(probs, msg)
		}
	}
	if len(probs) > 0 {
		b.bad(line, strings.Join(probs, "; "))
		return false
	}
	return true
}

func (b *builder) add(j Job, line int) {
	if i, ok := b.index[j.ID]; ok {
		prev := &b.jobs[i]
		if prev.Submit != j.Submit || prev.Duration != j.Duration || prev.Queue != j.Queue || prev.Share != j.Share ||
			prev.Priority != j.Priority || prev.PreemptionRetries != j.PreemptionRetries {
			b.bad(line, fmt.Sprintf("job_id %q is repeated with different fields: the rows of one job may differ only in instance_type and instance_count", j.ID))
			return
		}
		for t, n := range j.Demand {
			if prev.Demand[t] != 0 {
				b.bad(line, fmt.Sprintf("job_id %q names instance_type %s twice", j.ID, t))
				return
			}
			prev.Demand[t] = n
		}
		return
	}
	b.index[j.ID] = len(b.jobs)
	b.jobs = append(b.jobs, j)
}

func (b *builder) finish() ([]Job, []RowError, error) {
	if (len(b.rows) > 0 || b.more > 0) && !b.opts.SkipBadRows {
		return nil, b.rows, &TraceError{Name: b.opts.Name, Rows: b.rows, More: b.more}
	}
	sort.SliceStable(b.jobs, func(i, k int) bool { return b.jobs[i].Submit < b.jobs[k].Submit })
	return b.jobs, b.rows, nil
}

// PhillyOptions map the Philly trace onto quota shares.
type PhillyOptions struct {
	TraceOptions
	// GPUType is the instance type of one GPU (default ml.g5.xlarge).
	GPUType string
	// NodeType, when set, is an 8-GPU instance type: a job of 8·k GPUs
	// takes k of them, and the rest of any job (g mod 8) takes GPUType
	// instances. When empty every GPU is one GPUType instance.
	NodeType string
	// Queue is the job queue (default: the only queue of the configuration).
	Queue string
	// Exclude lists VCs whose jobs are left out (e.g. "unknown").
	Exclude []string
}

// ReadPhilly reads the Philly trace (columns job_id, submit_s, gpus,
// duration_s, vc) and maps it onto quota shares as the trace's README
// suggests: one share per VC, named after it; a job of g GPUs needs g
// GPUType instances, or, with NodeType, g/8 whole nodes plus g mod 8 single
// GPUs, all or nothing. Every job has priority 0 and unlimited preemption
// retries.
func ReadPhilly(r io.Reader, cfg *config.File, opts PhillyOptions) ([]Job, []RowError, error) {
	if opts.GPUType == "" {
		opts.GPUType = "ml.g5.xlarge"
	}
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, nil, qshare.Errorf(qshare.EINVALID, "%s: cannot read the header row: %v", opts.Name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range []string{"job_id", "submit_s", "gpus", "duration_s", "vc"} {
		if _, ok := col[c]; !ok {
			return nil, nil, qshare.Errorf(qshare.EINVALID, "%s: not a Philly trace: the header lacks %s (want job_id,submit_s,gpus,duration_s,vc)", opts.Name, c)
		}
	}
	exclude := map[string]bool{}
	for _, v := range opts.Exclude {
		exclude[v] = true
	}
	res := newResolver(cfg)
	b := newBuilder(opts.TraceOptions)
	err = b.records(cr, func(rec []string, line int) {
		vc := rec[col["vc"]]
		if exclude[vc] {
			return
		}
		j := Job{ID: rec[col["job_id"]], Queue: opts.Queue, Share: vc, PreemptionRetries: -1}
		var probs []string
		probs = times(&j, rec[col["submit_s"]], rec[col["duration_s"]], probs)
		g, err := strconv.ParseInt(rec[col["gpus"]], 10, 64)
		if err != nil || g < 1 {
			probs = append(probs, fmt.Sprintf("gpus %q is not a whole number of at least 1", rec[col["gpus"]]))
		}
		j.Demand = qshare.Capacity{}
		if opts.NodeType != "" && g >= 8 {
			j.Demand[opts.NodeType] = g / 8
			if g%8 > 0 {
				j.Demand[opts.GPUType] = g % 8
			}
		} else {
			j.Demand[opts.GPUType] = g
		}
		if j.ID == "" {
			probs = append(probs, "job_id is empty")
		}
		if !b.settle(res, &j, line, probs) {
			return
		}
		if _, dup := b.index[j.ID]; dup {
			b.bad(line, fmt.Sprintf("job_id %q is repeated", j.ID))
			return
		}
		b.add(j, line)
	})
	if err != nil {
		return nil, nil, err
	}
	return b.finish()
}
