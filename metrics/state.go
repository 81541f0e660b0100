package metrics

import (
	"math"

	"github.com/prometheus/client_golang/prometheus"

	"qshare"
	"qshare/daemon"
)

// Why a RUNNABLE job waits, the reason label of qshare_runnable_jobs.
const (
	// reasonHeadOfShare: the job is behind its share's head, which the
	// scheduler considers first.
	reasonHeadOfShare = "head_of_share"
	// reasonCapacity: the job is its share's head and waits for capacity.
	reasonCapacity = "capacity"
	// reasonMisconfiguration: the job is its share's head and can never fit
	// (a MISCONFIGURATION status reason).
	reasonMisconfiguration = "misconfiguration"
	// reasonPreemption: preemptions were issued for the job; it starts when
	// its victims have stopped.
	reasonPreemption = "preemption"
)

var (
	// An environment's gauges carry its executor: one environment has one,
	// so the label adds no series, and a sum by executor tells how much
	// each cluster holds.
	envLabels   = []string{"service_environment", "instance_type", "executor"}
	shareLabels = []string{"queue", "share", "instance_type"}

	// envGauges are the gauges of a service environment's capacity of one
	// instance type, each with what it reads from it.
	envGauges = []struct {
		desc  *prometheus.Desc
		value func(*qshare.EnvironmentLending) float64
	}{
		{prometheus.NewDesc("qshare_environment_capacity",
			"The service environment's maxCapacity of an instance type.", envLabels, nil),
			func(e *qshare.EnvironmentLending) float64 { return float64(e.MaxCapacity) }},
		{prometheus.NewDesc("qshare_environment_in_use",
			"Capacity of an instance type that jobs of the environment's quota shares hold, stopping jobs included.", envLabels, nil),
			func(e *qshare.EnvironmentLending) float64 { return float64(e.InUse) }},
		{prometheus.NewDesc("qshare_environment_unowned",
			"The part of the environment's capacity of an instance type that no quota share owns.", envLabels, nil),
			func(e *qshare.EnvironmentLending) float64 { return float64(e.Unowned) }},
	}
	// shareGauges are the gauges of a quota share's capacity of one
	// instance type, each with what it reads from it.
	shareGauges = []struct {
		desc  *prometheus.Desc
		value func(*qshare.CapacityLending) float64
	}{
		{prometheus.NewDesc("qshare_share_capacity",
			"A quota share's own limit (maxCapacity) of an instance type.", shareLabels, nil),
			func(k *qshare.CapacityLending) float64 { return float64(k.Owned) }},
		{prometheus.NewDesc("qshare_share_borrow_limit",
			"How much a quota share may borrow beyond its own limit of an instance type: 0 for a share that does not borrow, +Inf for no limit.", shareLabels, nil),
			borrowLimit},
		{prometheus.NewDesc("qshare_share_in_use",
			"Capacity of an instance type that a quota share's jobs hold, borrowed capacity included.", shareLabels, nil),
			func(k *qshare.CapacityLending) float64 { return float64(k.InUse) }},
		{prometheus.NewDesc("qshare_share_own_use",
			"The part of qshare_share_in_use within the share's own limit.", shareLabels, nil),
			func(k *qshare.CapacityLending) float64 { return float64(k.Own) }},
		{prometheus.NewDesc("qshare_share_borrowed",
			"The part of qshare_share_in_use beyond the share's own limit: borrowed capacity.", shareLabels, nil),
			func(k *qshare.CapacityLending) float64 { return float64(k.Borrowed) }},
		{prometheus.NewDesc("qshare_share_lent",
			"The part of a quota share's own capacity that other shares' jobs hold.", shareLabels, nil),
			func(k *qshare.CapacityLending) float64 { return float64(k.Lent) }},
		{prometheus.NewDesc("qshare_share_idle",
			"The part of a quota share's own capacity that nobody uses.", shareLabels, nil),
			func(k *qshare.CapacityLending) float64 { return float64(k.Idle) }},
	}

	descExecutorUp = prometheus.NewDesc("qshare_executor_up",
		"1 while the executor's service answers (slurmctld, a Kubernetes API server, a container engine; always, for an executor without one), 0 while its health says it does not; its environments' jobs are held meanwhile.",
		[]string{"executor"}, nil)
	descLent = prometheus.NewDesc("qshare_lent",
		"Capacity of an instance type that the lender share owns and the borrower share's jobs hold, as the scheduler attributes it (the borrower is QUEUE/SHARE when in another queue).",
		[]string{"queue", "lender", "borrower", "instance_type"}, nil)
	descBorrowedUnowned = prometheus.NewDesc("qshare_borrowed_unowned",
		"Capacity of an instance type that a quota share borrows from the environment's capacity no share owns.", shareLabels, nil)
	descJobs = prometheus.NewDesc("qshare_jobs",
		"Jobs the server keeps, by queue, quota share (empty in a queue without quota shares) and status.",
		[]string{"queue", "share", "status"}, nil)
	descRunnable = prometheus.NewDesc("qshare_runnable_jobs",
		"RUNNABLE jobs of a quota share by why they wait: head_of_share (behind the share's head), capacity (the head waits for capacity), misconfiguration (the head can never fit), preemption (waiting for the victims of its preemptions to stop).",
		[]string{"queue", "share", "reason"}, nil)
)

// borrowLimit is qshare_share_borrow_limit: how far beyond its own limit
// the share may go, +Inf for no limit.
func borrowLimit(k *qshare.CapacityLending) float64 {
	if k.Limit < 0 {
		return math.Inf(1)
	}
	return float64(max(0, k.Limit-k.Owned))
}

// stateCollector computes the gauges from one daemon.MetricsState per
// scrape.
type stateCollector struct {
	d *daemon.Daemon
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range envGauges {
		ch <- g.desc
	}
	for _, g := range shareGauges {
		ch <- g.desc
	}
	for _, d := range []*prometheus.Desc{descExecutorUp, descLent, descBorrowedUnowned, descJobs, descRunnable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.d.MetricsState()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	envs := map[string]bool{}
	for _, l := range st.Lending {
		if !envs[l.ServiceEnvironment] {
			envs[l.ServiceEnvironment] = true
			for i := range l.Capacity {
				e := &l.Capacity[i]
				for _, g := range envGauges {
					gauge(g.desc, g.value(e), l.ServiceEnvironment, e.CapacityUnit, l.Executor)
				}
			}
		}
		q := l.JobQueue
		for _, s := range l.QuotaShares {
			for i := range s.Capacity {
				k := &s.Capacity[i]
				t := k.CapacityUnit
				for _, g := range shareGauges {
					gauge(g.desc, g.value(k), q, s.QuotaShareName, t)
				}
				for _, f := range k.LentTo {
					gauge(descLent, float64(f.Quantity), q, s.QuotaShareName, f.QuotaShare, t)
				}
				for _, f := range k.BorrowedFrom {
					if f.Unowned {
						gauge(descBorrowedUnowned, float64(f.Quantity), q, s.QuotaShareName, t)
					}
				}
			}
		}
	}
	for _, w := range st.Waiting {
		for _, s := range w.Shares {
			var behind, capacity, misconf float64
			if s.Runnable > 0 {
				behind = float64(s.Runnable - 1)
				if s.Misconfigured {
					misconf = 1
				} else {
					capacity = 1
				}
			}
			// A reason no job waits for has no sample: most shares of a
			// large fleet have none, and a scrape stays small.
			for _, r := range [...]struct {
				n      float64
				reason string
			}{{behind, reasonHeadOfShare}, {capacity, reasonCapacity}, {misconf, reasonMisconfiguration}, {float64(s.Reserved), reasonPreemption}} {
				if r.n > 0 {
					gauge(descRunnable, r.n, w.Queue, s.Share, r.reason)
				}
			}
		}
	}
	for _, x := range st.Executors {
		up := 1.0
		if x.Health != "" {
			up = 0
		}
		gauge(descExecutorUp, up, x.Name)
	}
	for _, j := range st.Jobs {
		gauge(descJobs, float64(j.N), j.Queue, j.Share, string(j.Status))
	}
}
