package logs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	btypes "github.com/aws/aws-sdk-go-v2/service/batch/types"
	cwl "github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs/types"
	"github.com/aws/smithy-go"

	"qshare/aws/logs"
	"qshare/executor/process"
	"qshare/internal/sdkenv"
)

// The process executor's supervisors are this test binary.
func TestMain(m *testing.M) {
	process.MaybeSupervise()
	os.Exit(m.Run())
}

var ctx = context.Background()

// shellPayload is a CreateTrainingJob request that runs script with /bin/sh.
func shellPayload(script string) string {
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        "hello-world-simple-job-2026-12-04-21-12-44-123",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "img", "TrainingInputMode": "File", "ContainerEntrypoint": []string{"/bin/sh", "-c", script}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
		"StoppingCondition":      map[string]any{"MaxRuntimeInSeconds": 300},
	})
	return string(b)
}

// TestTrainingJobLogs reads a job's output the way the SageMaker SDK's log
// tailer does (sagemaker.core.utils.logs): the streams of "<job>/", then
// each from its head, following nextForwardToken until an answer has no
// events, with the same token again and again.
func TestTrainingJobLogs(t *testing.T) {
	ex, err := process.New(ctx, process.Options{DataDir: t.TempDir(), GPUs: []string{"none"}, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	e := sdkenv.New(t, ex)
	long := strings.Repeat("x", 300<<10) // one line of 300 KiB: two events of at most 256 KiB
	_, name := e.Submit(t, "hello", shellPayload(`echo 'Hello World'; i=1; while [ $i -le 5 ]; do echo "line $i"; i=$((i+1)); done; head -c 307200 /dev/zero | tr "\\0" x; echo; printf 'no newline'`),
		btypes.ServiceJobStatusSucceeded)
	c := cwl.NewFromConfig(e.Config(), func(o *cwl.Options) { o.BaseEndpoint = aws.String(e.URL) })

	ds, err := c.DescribeLogStreams(ctx, &cwl.DescribeLogStreamsInput{LogGroupName: aws.String(logs.Group), LogStreamNamePrefix: aws.String(name + "/"), OrderBy: types.OrderByLogStreamName})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds.LogStreams) != 1 || !strings.HasPrefix(aws.ToString(ds.LogStreams[0].LogStreamName), name+"/algo-1-") {
		t.Fatalf("streams of %s/: %+v", name, ds.LogStreams)
	}
	stream := ds.LogStreams[0].LogStreamName
	want := []string{"Hello World", "line 1", "line 2", "line 3", "line 4", "line 5", long[:256<<10], long[256<<10:], "no newline"}

	var got []string
	var token *string
	for calls := 0; ; calls++ {
		out, err := c.GetLogEvents(ctx, &cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: stream, StartFromHead: aws.Bool(true), NextToken: token, Limit: aws.Int32(2)})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Events) == 0 {
			if aws.ToString(out.NextForwardToken) != aws.ToString(token) {
				t.Errorf("the answer without events moves the token from %s to %s", aws.ToString(token), aws.ToString(out.NextForwardToken))
			}
			break
		}
		if calls > 10 {
			t.Fatal("the tailer never reaches the end")
		}
		token = out.NextForwardToken
		for _, ev := range out.Events {
			got = append(got, aws.ToString(ev.Message))
			if aws.ToInt64(ev.Timestamp) <= 0 {
				t.Errorf("event without a timestamp")
			}
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("forward events: %d, want %d; first %q", len(got), len(want), got[:min(len(got), 2)])
	}

	// Without startFromHead: the stream's tail, then backward.
	out, err := c.GetLogEvents(ctx, &cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: stream, Limit: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Events) != 2 || aws.ToString(out.Events[1].Message) != "no newline" {
		t.Fatalf("tail: %d events", len(out.Events))
	}
	back, err := c.GetLogEvents(ctx, &cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: stream, Limit: aws.Int32(3), NextToken: out.NextBackwardToken})
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Events) != 3 || aws.ToString(back.Events[0].Message) != "line 4" || aws.ToString(back.Events[2].Message) != long[:256<<10] {
		t.Errorf("backward page: %d events", len(back.Events))
	}

	for _, c2 := range []struct {
		in   cwl.GetLogEventsInput
		code string
	}{
		{cwl.GetLogEventsInput{LogGroupName: aws.String("/aws/other"), LogStreamName: stream}, "ResourceNotFoundException"},
		{cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: aws.String(name + "/algo-2-1")}, "ResourceNotFoundException"},
		{cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: aws.String(name + "/algo-1-1")}, "ResourceNotFoundException"},
		{cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: aws.String("../../etc/passwd")}, "ResourceNotFoundException"},
		{cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: stream, NextToken: aws.String("f/-1")}, "InvalidParameterException"},
		{cwl.GetLogEventsInput{LogGroupName: aws.String(logs.Group), LogStreamName: stream, NextToken: aws.String("x")}, "InvalidParameterException"},
	} {
		_, err := c.GetLogEvents(ctx, &c2.in)
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != c2.code {
			t.Errorf("GetLogEvents(%s, %s): %v, want %s", aws.ToString(c2.in.LogStreamName), aws.ToString(c2.in.NextToken), err, c2.code)
		}
	}
	// Every stream of the group, in pages of limit, in order or descending,
	// with a prefix.
	all := func(limit int32, desc bool, prefix string) []string {
		var out []string
		p := cwl.NewDescribeLogStreamsPaginator(c, &cwl.DescribeLogStreamsInput{LogGroupName: aws.String(logs.Group), Limit: aws.Int32(limit),
			Descending: aws.Bool(desc), LogStreamNamePrefix: aws.String(prefix)})
		for p.HasMorePages() {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range page.LogStreams {
				out = append(out, aws.ToString(s.LogStreamName))
			}
		}
		return out
	}
	if names := all(1, false, ""); fmt.Sprint(names) != fmt.Sprint([]string{aws.ToString(stream)}) {
		t.Errorf("all streams: %v", names)
	}

	// With more jobs, pages of every order hold each stream once, in
	// order: a page is chosen among all streams, not sorted whole.
	for _, n := range []string{"b", "c", "d"} {
		e.Submit(t, n, shellPayload("echo "+n), btypes.ServiceJobStatusSucceeded)
	}
	one := all(50, false, "")
	if len(one) != 4 || !slices.IsSorted(one) {
		t.Fatalf("the four jobs' streams in one page: %v", one)
	}
	down := slices.Clone(one)
	slices.Reverse(down)
	for _, lim := range []int32{1, 2, 3} {
		if got := all(lim, false, ""); fmt.Sprint(got) != fmt.Sprint(one) {
			t.Errorf("pages of %d: %v, want %v", lim, got, one)
		}
		if got := all(lim, true, ""); fmt.Sprint(got) != fmt.Sprint(down) {
			t.Errorf("descending pages of %d: %v, want %v", lim, got, down)
		}
	}
	if got := all(1, false, one[2][:len(one[2])-3]); fmt.Sprint(got) != fmt.Sprint(one[2:3]) {
		t.Errorf("the streams of prefix %q: %v", one[2][:len(one[2])-3], got)
	}
}
