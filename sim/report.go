package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run found. Times are in seconds of virtual time;
// capacity is in instance-seconds (instances of every type, summed).
type Report struct {
	Jobs JobCounts `json:"jobs"`
	// MakespanS is when the last job gave its capacity back.
	MakespanS float64 `json:"makespan_s"`
	// Utilization is capacity used over capacity available (every
	// environment's limits, over the makespan).
	Utilization   float64          `json:"utilization"`
	Preemptions   PreemptionCounts `json:"preemptions"`
	WorkLostInstS float64          `json:"work_lost_instance_s"`
	Wait          Stats            `json:"wait_s"`
	Engine        EngineCounts     `json:"engine"`
	// Timing is present only when Options.Timing is set: wall-clock
	// figures differ from run to run.
	Timing *Timing       `json:"timing,omitempty"`
	Queues []QueueReport `json:"queues"`
	Shares []ShareReport `json:"shares"`
	Series *SeriesReport `json:"-"`
	// Outcomes lists every job's fate, in trace order, when
	// Options.Outcomes is set.
	Outcomes []JobOutcome `json:"-"`
}

// JobOutcome is what happened to one job.
type JobOutcome struct {
	ID     string
	Submit time.Duration
	// FirstStart is when it first took its capacity; -1 if it never did.
	FirstStart time.Duration
	// End is when it finished or failed; -1 if it never did.
	End         time.Duration
	Completed   bool
	Preemptions int
}

// JobCounts counts jobs by how they ended.
type JobCounts struct {
	Submitted int `json:"submitted"`
	Completed int `json:"completed"`
	// Failed counts jobs that failed: exhausted preemption retries, or
	// rejected at submit by a DISABLED share.
	Failed int `json:"failed"`
	// Unfinished counts jobs still waiting at the end: they could not fit
	// (Misconfigured of them were told why by the engine), or they waited
	// behind such a job. NeverStarted of them never ran at all; the others
	// were preempted and never restarted.
	Unfinished    int `json:"unfinished"`
	NeverStarted  int `json:"never_started"`
	Misconfigured int `json:"misconfigured"`
}

// PreemptionCounts counts preemptions by kind.
type PreemptionCounts struct {
	CrossShare int `json:"cross_share"`
	InShare    int `json:"in_share"`
}

// Stats summarises a distribution of durations, in seconds.
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// EngineCounts are the engine's counters at the end of the run.
type EngineCounts struct {
	Passes    uint64 `json:"passes"`
	Decisions uint64 `json:"decisions"`
	Starts    uint64 `json:"starts"`
	Preempts  uint64 `json:"preempts"`
}

// Timing holds the wall-clock figures of a run.
type Timing struct {
	WallS   float64 `json:"wall_s"`
	EngineS float64 `json:"engine_s"`
	// Decisions is the engine's decision count; DecisionsPerS divides it
	// by the wall time spent inside the engine.
	Decisions     uint64  `json:"decisions"`
	DecisionsPerS float64 `json:"decisions_per_s"`
}

// QueueReport sums a job queue's shares.
type QueueReport struct {
	Queue       string  `json:"queue"`
	Environment string  `json:"environment"`
	Submitted   int     `json:"submitted"`
	Completed   int     `json:"completed"`
	MakespanS   float64 `json:"makespan_s"`
	// Utilization is what the queue's jobs used over the environment's
	// capacity over the makespan.
	Utilization   float64          `json:"utilization"`
	Preemptions   PreemptionCounts `json:"preemptions"`
	WorkLostInstS float64          `json:"work_lost_instance_s"`
}

// ShareReport is one quota share's figures.
type ShareReport struct {
	Queue        string           `json:"queue"`
	Share        string           `json:"share"`
	Strategy     string           `json:"strategy"`
	OwnCapacity  int64            `json:"own_capacity"`
	Submitted    int              `json:"submitted"`
	Completed    int              `json:"completed"`
	Failed       int              `json:"failed"`
	Unfinished   int              `json:"unfinished"`
	NeverStarted int              `json:"never_started"`
	Wait         Stats            `json:"wait_s"`
	Run          Stats            `json:"run_s"`
	Preemptions  PreemptionCounts `json:"preemptions"`
	// WorkLostInstS is the work preempted jobs lost (since their last
	// checkpoint), in instance-seconds.
	WorkLostInstS float64 `json:"work_lost_instance_s"`
	// Instance-seconds: used in all, within its own maxCapacity, borrowed
	// beyond it, lent to borrowers, and own capacity left idle.
	UsedInstS     float64 `json:"used_instance_s"`
	OwnInstS      float64 `json:"own_instance_s"`
	BorrowedInstS float64 `json:"borrowed_instance_s"`
	LentInstS     float64 `json:"lent_instance_s"`
	IdleInstS     float64 `json:"idle_instance_s"`
	// OwnUtilization is own_instance_s over its own capacity over the makespan.
	OwnUtilization float64 `json:"own_utilization"`
}

// SeriesReport is the time series behind the plots.
type SeriesReport struct {
	// BucketS is the width of a bucket in seconds.
	BucketS float64
	// Shares holds, per share (in Report.Shares order), the mean instances
	// used within own capacity, borrowed and lent in each bucket.
	Own, Borrowed, Lent [][]float64
	// Capacity is the environments' total capacity.
	Capacity float64
	// Cross and InShare count preemptions per bucket.
	Cross, InShare []float64
	// Waits holds each share's sorted waits in seconds.
	Waits [][]float64
}

func round(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return round(a / b)
}

// statsOf summarises sorted values (nearest-rank percentiles).
func statsOf(sorted []float64) Stats {
	n := len(sorted)
	if n == 0 {
		return Stats{}
	}
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	pct := func(p float64) float64 {
		i := int(math.Ceil(p*float64(n))) - 1
		return round(sorted[max(0, min(n-1, i))])
	}
	return Stats{N: n, Mean: round(sum / float64(n)), P50: pct(0.50), P95: pct(0.95), P99: pct(0.99), Max: round(sorted[n-1])}
}

func (s *simulator) report(jobs []Job) *Report {
	a := s.acct
	end := a.lastEnd
	a.finish(end)
	rep := &Report{MakespanS: round(end.Seconds())}
	st := s.eng.Stats()
	rep.Engine = EngineCounts{Passes: st.Passes, Decisions: st.Decisions, Starts: st.Starts, Preempts: st.Preempts}

	waits := map[*shareAcc][]float64{}
	runs := map[*shareAcc][]float64{}
	never := map[*shareAcc]int{}
	unfinished := map[*shareAcc]int{}
	var all []float64
	for i := range jobs {
		r := s.runs[jobs[i].ID]
		if r.state != jobDone {
			unfinished[r.share]++
		}
		switch {
		case r.first >= 0:
			w := (r.first - r.job.Submit).Seconds()
			waits[r.share] = append(waits[r.share], w)
			all = append(all, w)
			runs[r.share] = append(runs[r.share], r.held.Seconds())
		case !r.failed:
			never[r.share]++
		}
	}
	sort.Float64s(all)
	rep.Wait = statsOf(all)
	if s.opts.Outcomes {
		rep.Outcomes = make([]JobOutcome, len(jobs))
		for i := range jobs {
			r := s.runs[jobs[i].ID]
			rep.Outcomes[i] = JobOutcome{ID: r.job.ID, Submit: r.job.Submit, FirstStart: r.first, End: r.end,
				Completed: r.state == jobDone && !r.failed, Preemptions: r.preemptions}
		}
	}

	series := &SeriesReport{BucketS: a.tl.width.Seconds(), Cross: a.cross, InShare: a.inShare}
	var used, capacity float64
	for _, env := range a.envs {
		capacity += float64(env.capacity)
	}
	series.Capacity = capacity
	queues := map[string]*QueueReport{}
	var queueOrder []string
	for _, sh := range a.shares {
		w, rn := waits[sh], runs[sh]
		sort.Float64s(w)
		sort.Float64s(rn)
		own := float64(sh.limits.Total())
		sr := ShareReport{
			Queue: sh.queue, Share: sh.name, Strategy: string(sh.strategy), OwnCapacity: sh.limits.Total(),
			Submitted: sh.submitted + sh.rejected, Completed: sh.completed, Failed: sh.failed + sh.rejected, Unfinished: unfinished[sh], NeverStarted: never[sh],
			Wait: statsOf(w), Run: statsOf(rn),
			Preemptions:   PreemptionCounts{CrossShare: sh.preemptCross, InShare: sh.preemptInShare},
			WorkLostInstS: round(sh.lostInstanceS),
			UsedInstS:     round(sh.acc[mUsed]), OwnInstS: round(sh.acc[mOwn]), BorrowedInstS: round(sh.acc[mBorrowed]),
			LentInstS: round(sh.acc[mLent]), IdleInstS: round(sh.acc[mIdle]),
			OwnUtilization: ratio(sh.acc[mOwn], own*end.Seconds()),
		}
		rep.Shares = append(rep.Shares, sr)
		used += sh.acc[mUsed]
		rep.Jobs.Submitted += sr.Submitted
		rep.Jobs.Completed += sr.Completed
		rep.Jobs.Failed += sr.Failed
		rep.Jobs.NeverStarted += sr.NeverStarted
		rep.Jobs.Unfinished += sr.Unfinished
		rep.Jobs.Misconfigured += len(sh.misconfigured)
		rep.Preemptions.CrossShare += sr.Preemptions.CrossShare
		rep.Preemptions.InShare += sr.Preemptions.InShare
		rep.WorkLostInstS += sh.lostInstanceS

		q := queues[sh.queue]
		if q == nil {
			q = &QueueReport{Queue: sh.queue, Environment: sh.env.name, MakespanS: rep.MakespanS}
			queues[sh.queue] = q
			queueOrder = append(queueOrder, sh.queue)
		}
		q.Submitted += sr.Submitted
		q.Completed += sr.Completed
		q.Preemptions.CrossShare += sr.Preemptions.CrossShare
		q.Preemptions.InShare += sr.Preemptions.InShare
		q.WorkLostInstS += sh.lostInstanceS
		q.Utilization += sh.acc[mUsed] // divided below

		series.Own = append(series.Own, sh.series[mOwn])
		series.Borrowed = append(series.Borrowed, sh.series[mBorrowed])
		series.Lent = append(series.Lent, sh.series[mLent])
		series.Waits = append(series.Waits, w)
	}
	for _, name := range queueOrder {
		q := queues[name]
		var envCap float64
		for _, env := range a.envs {
			if env.name == q.Environment {
				envCap = float64(env.capacity)
			}
		}
		q.Utilization = ratio(q.Utilization, envCap*end.Seconds())
		q.WorkLostInstS = round(q.WorkLostInstS)
		rep.Queues = append(rep.Queues, *q)
	}
	rep.WorkLostInstS = round(rep.WorkLostInstS)
	rep.Utilization = ratio(used, capacity*end.Seconds())
	rep.Series = series
	return rep
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// dur renders seconds for people: 45s, 12m, 3.5h, 2.1d.
func dur(s float64) string {
	switch {
	case s < 120:
		return fmt.Sprintf("%.3gs", s)
	case s < 7200:
		return fmt.Sprintf("%.3gm", s/60)
	case s < 3*86400:
		return fmt.Sprintf("%.3gh", s/3600)
	}
	return fmt.Sprintf("%.3gd", s/86400)
}

func pct(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) }

// WriteSummary writes the human summary: the headline figures and a table
// per share.
func (r *Report) WriteSummary(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs: %d submitted, %d completed, %d failed, %d unfinished (%d never started)", r.Jobs.Submitted, r.Jobs.Completed, r.Jobs.Failed, r.Jobs.Unfinished, r.Jobs.NeverStarted)
	if r.Jobs.Misconfigured > 0 {
		fmt.Fprintf(&b, " (%d misconfigured)", r.Jobs.Misconfigured)
	}
	fmt.Fprintf(&b, "\nmakespan %s, utilization %s, wait p50 %s p95 %s p99 %s\n", dur(r.MakespanS), pct(r.Utilization), dur(r.Wait.P50), dur(r.Wait.P95), dur(r.Wait.P99))
	fmt.Fprintf(&b, "preemptions: %d cross-share, %d in-share; work lost %s instance-hours\n", r.Preemptions.CrossShare, r.Preemptions.InShare, trim(r.WorkLostInstS/3600))
	fmt.Fprintf(&b, "engine: %d passes, %d decisions", r.Engine.Passes, r.Engine.Decisions)
	if r.Timing != nil {
		fmt.Fprintf(&b, ", %.0f decisions/s (%.2fs in the engine, %.2fs in all)", r.Timing.DecisionsPerS, r.Timing.EngineS, r.Timing.WallS)
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue/share\tstrategy\town\tjobs\tdone\twait p50\tp95\tp99\tpreempt x/in\tused inst-h\tborrowed\tlent\tidle\town util\t")
	for _, s := range r.Shares {
		fmt.Fprintf(tw, "%s/%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%s\t%s\t\n",
			s.Queue, s.Share, s.Strategy, s.OwnCapacity, s.Submitted, s.Completed, dur(s.Wait.P50), dur(s.Wait.P95), dur(s.Wait.P99),
			s.Preemptions.CrossShare, s.Preemptions.InShare, trim(s.UsedInstS/3600), trim(s.BorrowedInstS/3600), trim(s.LentInstS/3600),
			trim(s.IdleInstS/3600), pct(s.OwnUtilization))
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

func trim(x float64) string {
	if x >= 100 {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.3g", x)
}
