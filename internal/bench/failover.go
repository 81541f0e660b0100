package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// FailoverOptions say how `qshare bench failover` measures a failover.
type FailoverOptions struct {
	// Store is the postgres:// URL of the store the two servers share;
	// required. It should be an empty database.
	Store string
	// Binary is the qshare executable; the running one when empty.
	Binary string
	// LogLevel is the servers' --log-level ("warn" when empty).
	LogLevel string
	// Jobs is how many jobs are stored (waiting, RUNNABLE) before the
	// first failover.
	Jobs int
	// Failovers is how many times the leader is killed.
	Failovers int
	// Clients submit the Jobs.
	Clients int
}

// FailoverResult is what `qshare bench failover` reports.
type FailoverResult struct {
	Jobs      int `json:"jobs" row:"stored jobs;%.0f"`
	Failovers int `json:"failovers" row:"failovers;%.0f"`
	// LoadS is how long storing the jobs took, through the leader.
	LoadS float64 `json:"load_s" row:"storing the jobs;%.1f;s"`
	// TakeoverMs is, per failover, the time from the leader's SIGKILL to
	// the first submit the standby acknowledged (tried every 5 ms).
	TakeoverMs []float64 `json:"takeover_ms"`
	MedianMs   float64   `json:"median_ms" row:"leader killed → standby acknowledges a submit, median;%.0f;ms;target < 3 s"`
	MinMs      float64   `json:"min_ms" row:"the same, fastest;%.0f;ms"`
	MaxMs      float64   `json:"max_ms" row:"the same, slowest;%.0f;ms"`
	// LoadAvg is the 1-minute load average when the failovers began.
	LoadAvg float64 `json:"load_avg_1m" row:"load average (1 min) at the first failover;%.1f"`
}

// RunFailover starts two servers (simulated executor) on opt.Store, stores
// opt.Jobs waiting jobs through the leader, and then opt.Failovers times
// kills the leader with SIGKILL and measures how long the standby takes to
// acknowledge a submit; the killed server is started again, as a standby,
// after each.
func RunFailover(ctx context.Context, opt FailoverOptions) (FailoverResult, error) {
	res := FailoverResult{Jobs: opt.Jobs, Failovers: opt.Failovers}
	if opt.Store == "" {
		return res, errors.New("bench failover: --store postgres://... is required: the database the two servers share (an empty one)")
	}
	if opt.Failovers < 1 || opt.Clients < 1 || opt.Jobs < 0 {
		return res, errors.New("bench failover: need at least one failover and one client, and no negative number of jobs")
	}
	so := ServerOptions{Binary: opt.Binary, Executor: "simulated", LogLevel: opt.LogLevel,
		Args: []string{"--store", opt.Store, "--allow-host", "127.0.0.1"}}
	var servers [2]*Server
	defer func() {
		for _, s := range servers {
			s.Close() //nolint:errcheck // on the way out
		}
	}()
	var err error
	if servers[0], err = StartServer(ctx, so); err != nil {
		return res, err
	}
	if servers[1], err = StartServer(ctx, so); err != nil {
		return res, err
	}
	c := NewClient(servers[0].Endpoint, ClientOptions{Conns: opt.Clients})
	queues, err := applyConfig(ctx, c, submitConfig(0), "")
	if err != nil {
		return res, err
	}
	queue := queues["submit"]
	t0 := time.Now()
	if err := storeJobs(ctx, servers[0].Endpoint, queue, opt.Jobs, opt.Clients); err != nil {
		return res, err
	}
	res.LoadS = time.Since(t0).Seconds()
	res.LoadAvg = LoadAverage()
	for k := range opt.Failovers {
		leader := -1
		for i, s := range servers {
			if readyz(s.Endpoint) {
				leader = i
			}
		}
		if leader < 0 {
			return res, fmt.Errorf("bench failover: no server is ready before failover %d", k+1)
		}
		standby := servers[1-leader]
		sc := NewClient(standby.Endpoint, ClientOptions{Conns: 1})
		syscall.Kill(servers[leader].Pid(), syscall.SIGKILL) //nolint:errcheck // it may be gone
		killed := time.Now()
		for n := 0; ; n++ {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := sc.SubmitServiceJob(rctx, submitInput(queue, fmt.Sprintf("after-failover-%d-%d", k, n)))
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			if time.Since(killed) > 2*time.Minute {
				return res, fmt.Errorf("bench failover: the standby acknowledged no submit within 2 minutes of the leader's death: %v%s", err, standby.logTail())
			}
			time.Sleep(5 * time.Millisecond)
		}
		res.TakeoverMs = append(res.TakeoverMs, float64(time.Since(killed).Microseconds())/1000)
		servers[leader].Close() //nolint:errcheck // killed already
		if servers[leader], err = StartServer(ctx, so); err != nil {
			return res, err
		}
	}
	sorted := append([]float64(nil), res.TakeoverMs...)
	sort.Float64s(sorted)
	res.MinMs, res.MaxMs = sorted[0], sorted[len(sorted)-1]
	res.MedianMs = sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		res.MedianMs = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	return res, nil
}

// storeJobs submits n jobs to queue from clients concurrent clients.
func storeJobs(ctx context.Context, endpoint, queue string, n, clients int) error {
	c := NewClient(endpoint, ClientOptions{Conns: clients})
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range clients {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(n) || ctx.Err() != nil {
					return
				}
				if _, err := retryTransient(ctx, 3, func() error {
					_, err := c.SubmitServiceJob(ctx, submitInput(queue, fmt.Sprintf("stored-%d", i)))
					return err
				}); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("bench failover: storing job %d: %w", i, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// readyz reports whether GET /readyz at endpoint answers 200.
func readyz(endpoint string) bool {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(endpoint + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
