package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/chromedp/chromedp"

	"qshare/internal/batchclient"
)

// scaleShares and scaleJobs are the size of the measurement of issue 19:
// 1,000 quota shares of one ml.g5.xlarge each in one queue, and 11 jobs of
// one instance in each share, of which one runs and ten wait: 10,000
// RUNNABLE jobs.
const (
	scaleShares   = 1000
	scaleJobsEach = 11
)

// BenchmarkDashboardScale measures the Shares and Queue views at 1,000
// shares and 10,000 RUNNABLE jobs: the server's time per refresh (the
// requests a view makes, one after the other, over loopback) and the time
// Chromium takes to fetch and draw the view (the page's own measure,
// data-render-ms: from the start of a refresh to its DOM being in place;
// data-paint-ms: to the first frame the browser drew after it).
// It is a measurement, not a test: run it with
//
//	go test ./test/dashboard -run '^$' -bench DashboardScale -benchtime 20x
func BenchmarkDashboardScale(b *testing.B) {
	if chromium == "" {
		b.Skip("Chromium is not installed (no /usr/bin/chromium): install it with apt-get install -y chromium")
	}
	e := newBenchEnv(b)
	e.setupScale(b)

	client := &http.Client{}
	fetch := func(b *testing.B, method, path, body string) int64 {
		req, _ := http.NewRequest(method, e.Srv.Endpoint+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("%s %s: %d", method, path, resp.StatusCode)
		}
		return n
	}
	b.Run("shares/server", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = fetch(b, http.MethodGet, "/qshare/v1/lending", "")
		}
		b.ReportMetric(float64(n), "bytes/refresh")
	})
	b.Run("queue/server", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = fetch(b, http.MethodPost, "/v1/describejobqueues", "{}")
			n += fetch(b, http.MethodGet, "/qshare/v1/queue?jobQueue=big", "")
		}
		b.ReportMetric(float64(n), "bytes/refresh")
	})
	for _, view := range []string{"shares", "queue"} {
		b.Run(view+"/chromium", func(b *testing.B) {
			e.open(b, view)
			var total, painted float64
			n := 0
			for b.Loop() {
				before := e.renders(b)
				deadline := time.Now().Add(time.Minute)
				for e.painted(b) <= before {
					if time.Now().After(deadline) {
						b.Fatalf("the %s view did not refresh within a minute", view)
					}
					time.Sleep(20 * time.Millisecond)
				}
				ms, err := chromedp.Run(e.ctx, chromedp.Evaluate[float64](`+document.body.dataset.renderMs`))
				if err != nil {
					b.Fatal(err)
				}
				pm, err := chromedp.Run(e.ctx, chromedp.Evaluate[float64](`+document.body.dataset.paintMs`))
				if err != nil {
					b.Fatal(err)
				}
				total += ms
				painted += pm
				n++
			}
			b.ReportMetric(total/float64(n), "render-ms/op")
			b.ReportMetric(painted/float64(n), "painted-ms/op")
			rows, _ := chromedp.Run(e.ctx, chromedp.Evaluate[int](`document.querySelectorAll("tr.share-row, table.front tbody tr, table.share-fronts tbody tr").length`))
			b.ReportMetric(float64(rows), "rows")
		})
	}
}

// benchEnv is the benchmark's server and browser tab.
type benchEnv struct {
	*env
}

func newBenchEnv(b *testing.B) *benchEnv {
	b.Helper()
	// newEnv needs a *testing.T only for Helper, Fatal, TempDir, Cleanup
	// and Log: a benchmark has all of them through testing.TB.
	return &benchEnv{newEnvTB(b, "--max-quota-shares-per-queue", fmt.Sprint(scaleShares))}
}

func (e *benchEnv) open(b *testing.B, view string) {
	if err := chromedp.Do(e.ctx, chromedp.Navigate(e.Srv.Endpoint+"/ui/#"+view)); err != nil {
		b.Fatal(err)
	}
}

// painted is the number of the last refresh the browser has painted.
func (e *benchEnv) painted(b *testing.B) int {
	n, err := chromedp.Run(e.ctx, chromedp.Evaluate[int](`+(document.body.dataset.painted || 0)`))
	if err != nil {
		b.Fatal(err)
	}
	return n
}

func (e *benchEnv) renders(b *testing.B) int {
	n, err := chromedp.Run(e.ctx, chromedp.Evaluate[int](`+(document.body.dataset.renders || 0)`))
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// setupScale creates the queue of 1,000 shares with qshare apply and
// submits 11,000 jobs through the AWS SDK, then waits until 10,000 of them
// are RUNNABLE with a reason.
func (e *benchEnv) setupScale(b *testing.B) {
	b.Helper()
	var y strings.Builder
	fmt.Fprintf(&y, "serviceEnvironments:\n  - serviceEnvironmentName: big-env\n    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: %d}]\n", scaleShares)
	y.WriteString("schedulingPolicies:\n  - name: big-policy\n    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}\n")
	y.WriteString("jobQueues:\n  - jobQueueName: big\n    priority: 1\n    schedulingPolicy: big-policy\n    serviceEnvironment: big-env\n    quotaShares:\n")
	for i := range scaleShares {
		strategy := []string{"LEND_AND_BORROW", "LEND", "RESERVE"}[i%3]
		fmt.Fprintf(&y, "      - quotaShareName: share-%04d\n        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]\n        resourceSharingConfiguration: {strategy: %s}\n        preemptionConfiguration: {inSharePreemption: DISABLED}\n", i, strategy)
	}
	path := filepath.Join(e.Dir, "big.yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	e.OK("apply", "-f", path, "--max-quota-shares-per-queue", fmt.Sprint(scaleShares))
	b.Logf("applied %d shares in %v", scaleShares, time.Since(start).Round(time.Millisecond))

	c := batchclient.New(e.Srv.Endpoint, "us-east-1")
	payload := `{"TrainingJobName":"train","AlgorithmSpecification":{"TrainingImage":"img","TrainingInputMode":"File"},` +
		`"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":1},"StoppingCondition":{"MaxRuntimeInSeconds":86400},` +
		`"Environment":{"QSHARE_SIM_DURATION":"24h"}}`
	start = time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= scaleShares*scaleJobsEach {
					return
				}
				_, err := c.SubmitServiceJob(b.Context(), &batch.SubmitServiceJobInput{
					JobName: aws.String(fmt.Sprintf("job-%05d", i)), JobQueue: aws.String("big"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
					ServiceRequestPayload: aws.String(payload), QuotaShareName: aws.String(fmt.Sprintf("share-%04d", i%scaleShares)),
					SchedulingPriority: aws.Int32(int32(i % 7))})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	b.Logf("submitted %d jobs in %v", scaleShares*scaleJobsEach, time.Since(start).Round(time.Millisecond))
	// Wait until the scheduler has placed what it can: 10,000 RUNNABLE.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		n := 0
		var token *string
		for {
			out, err := c.ListServiceJobs(b.Context(), &batch.ListServiceJobsInput{JobQueue: aws.String("big"), JobStatus: types.ServiceJobStatusRunnable, NextToken: token})
			if err != nil {
				b.Fatal(err)
			}
			n += len(out.JobSummaryList)
			if token = out.NextToken; token == nil {
				break
			}
		}
		if n == scaleShares*(scaleJobsEach-1) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d RUNNABLE jobs after 5 minutes, want %d", n, scaleShares*(scaleJobsEach-1))
		}
		time.Sleep(time.Second)
	}
	b.Logf("%d jobs RUNNABLE after %v", scaleShares*(scaleJobsEach-1), time.Since(start).Round(time.Millisecond))
}
