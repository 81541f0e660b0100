package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/internal/batchclient"
	"qshare/internal/serveproc"
)

func TestCheckLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8750": true, "localhost:1": true, "[::1]:8750": true, "127.0.0.2:0": true,
		"0.0.0.0:8750": false, ":8750": false, "10.0.0.1:80": false, "example.com:80": false, "nonsense": false,
	} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v", addr, err)
		}
	}
}

// buildBinary builds qshare into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin, err := serveproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// serveProc is a running qshare serve.
type serveProc struct {
	cmd  *exec.Cmd
	addr string
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

func startProcess(t *testing.T, bin, dir string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", dir, "--executor", "simulated", "--log-level", "warn"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				lines <- m[1]
			}
		}
		close(lines)
	}()
	select {
	case addr, ok := <-lines:
		if !ok {
			t.Fatal("qshare serve exited before listening")
		}
		p := &serveProc{cmd: cmd, addr: addr}
		t.Cleanup(func() {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		})
		return p
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("qshare serve did not print its address")
	}
	return nil
}

func serveClient(addr string) *batch.Client {
	return batchclient.New(addr, "us-east-1")
}

// TestRestart starts the real binary, submits jobs from concurrent clients,
// kills the server with SIGKILL in the middle, starts it again on the same
// data, and checks that every acknowledged job is there once, that all of
// them succeed, that no job ever ran two attempts at once, and that the
// environment's capacity was never over-used.
func TestRestart(t *testing.T) {
	t.Parallel() // a binary and a directory of its own, mostly waiting on it; with the package's other long tests
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	ctx := context.Background()
	p := startProcess(t, bin, dir)
	c := serveClient(p.addr)

	const capacity = 4
	pol, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("pol"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	serveMust(t, err)
	_, err = c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(capacity)}}})
	serveMust(t, err)
	_, err = c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("q"), Priority: aws.Int32(1), SchedulingPolicyArn: pol.Arn,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("env")}}})
	serveMust(t, err)
	for _, sh := range []struct {
		name     string
		strategy types.QuotaShareResourceSharingStrategy
		inShare  types.QuotaShareInSharePreemptionState
	}{{"A", types.QuotaShareResourceSharingStrategyLendAndBorrow, types.QuotaShareInSharePreemptionStateEnabled},
		{"B", types.QuotaShareResourceSharingStrategyLend, types.QuotaShareInSharePreemptionStateDisabled}} {
		_, err = c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh.name), JobQueue: aws.String("q"),
			CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(2)}},
			ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: sh.strategy},
			PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: sh.inShare}})
		serveMust(t, err)
	}

	var mu sync.Mutex
	acked := map[string]bool{}
	var nacked atomic.Int64
	submitAll := func(c *batch.Client, clients, perClient int, tag string, stopOnError bool) {
		var wg sync.WaitGroup
		for w := range clients {
			wg.Go(func() {
				for i := range perClient {
					share := []string{"A", "B"}[(w+i)%2]
					dur := time.Duration(20+(w*7+i*13)%80) * time.Millisecond
					out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
						JobName: aws.String(fmt.Sprintf("%s-%d-%d", tag, w, i)), JobQueue: aws.String("q"), QuotaShareName: aws.String(share),
						SchedulingPriority: aws.Int32(int32((w + i) % 4)), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
						ServiceRequestPayload: aws.String(fmt.Sprintf(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":%d},"Environment":{"QSHARE_SIM_DURATION":"%s"}}`, 1+(w+i)%2, dur)),
					})
					if err != nil {
						if stopOnError {
							return
						}
						t.Error(err)
						continue
					}
					mu.Lock()
					acked[*out.JobId] = true
					mu.Unlock()
					nacked.Add(1)
				}
			})
		}
		wg.Wait()
	}

	// Kill the server once some submits are acknowledged and jobs run.
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for nacked.Load() < 60 {
			time.Sleep(time.Millisecond)
		}
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}()
	submitAll(c, 8, 40, "before", true)
	<-killed
	before := nacked.Load()
	t.Logf("%d submits acknowledged before SIGKILL", before)

	p2 := startProcess(t, bin, dir)
	c2 := serveClient(p2.addr)
	submitAll(c2, 4, 5, "after", false)

	// Every job reaches SUCCEEDED.
	deadline := time.Now().Add(60 * time.Second)
	var all []types.ServiceJobSummary
	for {
		all = all[:0]
		pg := batch.NewListServiceJobsPaginator(c2, &batch.ListServiceJobsInput{JobQueue: aws.String("q"),
			Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
		for pg.HasMorePages() {
			out, err := pg.NextPage(ctx)
			serveMust(t, err)
			all = append(all, out.JobSummaryList...)
		}
		done := 0
		for _, j := range all {
			if j.Status == types.ServiceJobStatusSucceeded {
				done++
			} else if j.Status == types.ServiceJobStatusFailed {
				t.Fatalf("job %s failed: %s", *j.JobName, aws.ToString(j.StatusReason))
			}
		}
		if done == len(all) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs succeeded after 60s", done, len(all))
		}
		time.Sleep(100 * time.Millisecond)
	}

	seen := map[string]bool{}
	for _, j := range all {
		if seen[*j.JobId] {
			t.Fatalf("job %s listed twice", *j.JobId)
		}
		seen[*j.JobId] = true
	}
	for id := range acked {
		if !seen[id] {
			t.Errorf("acknowledged job %s is missing after the restart", id)
		}
	}
	t.Logf("%d jobs acknowledged, %d stored (a submit cut by the kill may be stored unacknowledged)", len(acked), len(all))

	// Capacity: replay every attempt's [startedAt, stoppedAt] interval.
	type event struct {
		at    int64
		delta int64
	}
	var events []event
	for _, j := range all {
		d, err := c2.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: j.JobId})
		serveMust(t, err)
		demand := int64(aws.ToFloat64(d.CapacityUsage[0].Quantity))
		var prevStop int64
		for i, a := range d.Attempts {
			if a.StartedAt == nil {
				continue // never ran (stopped before it started)
			}
			if a.StoppedAt == nil {
				t.Fatalf("job %s attempt %d has no stop time", *j.JobName, i+1)
			}
			if *a.StartedAt < prevStop {
				t.Fatalf("job %s: attempt %d started at %d before the previous one stopped at %d", *j.JobName, i+1, *a.StartedAt, prevStop)
			}
			prevStop = *a.StoppedAt
			events = append(events, event{*a.StartedAt, demand}, event{*a.StoppedAt, -demand})
		}
	}
	sort.Slice(events, func(i, j int) bool {
		if events[i].at != events[j].at {
			return events[i].at < events[j].at
		}
		return events[i].delta < events[j].delta // stops before starts at the same instant
	})
	var used, peak int64
	for _, e := range events {
		used += e.delta
		peak = max(peak, used)
		if used > capacity {
			t.Fatalf("capacity over-used: %d instances at %d (limit %d)", used, e.at, capacity)
		}
	}
	t.Logf("peak usage %d of %d", peak, capacity)
	if !strings.HasPrefix(p2.addr, "http://127.0.0.1:") {
		t.Fatalf("address %s", p2.addr)
	}

	// SIGTERM ends the server cleanly.
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- p2.cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("qshare serve after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("qshare serve did not exit after SIGTERM")
	}
}

func serveMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestParseRetention checks the forms --job-retention takes.
func TestParseRetention(t *testing.T) {
	for in, want := range map[string]time.Duration{"0": 0, "7d": 7 * 24 * time.Hour, "36500d": 36500 * 24 * time.Hour, "0d": 0, "36h": 36 * time.Hour, "90m": 90 * time.Minute} {
		got, err := parseRetention(in)
		if err != nil || got != want {
			t.Errorf("parseRetention(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1h", "x", "1.5d", "-2d", "36501d", "999999999d"} {
		if _, err := parseRetention(in); err == nil {
			t.Errorf("parseRetention(%q) succeeded, want an error", in)
		}
	}
}
