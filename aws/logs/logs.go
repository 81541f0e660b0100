// Package logs is the CloudWatch Logs endpoint of qshare, for the one log
// group that SageMaker writes its training jobs' output to,
// /aws/sagemaker/TrainingJobs: the SageMaker Python SDK's
// TrainingJob.wait(logs=True) and ModelTrainer.train(logs=True) list the
// training job's streams (DescribeLogStreams, with the prefix "<job>/")
// and read each from its head (GetLogEvents with startFromHead, then the
// nextForwardToken of each answer until an answer has no events).
//
// A stream is one instance of one attempt, named as SageMaker names it,
// "<training job>/algo-<k>-<epoch>" (k from 1; epoch the attempt's start in
// seconds), and its events are the lines of that instance's output as the
// executor keeps it (executor.Executor.Logs, executor.InstanceLogger for
// k > 1). The endpoint keeps nothing: a token is a byte offset into the
// executor's log. The protocol is awsJson1_1 (package awsjson), target
// prefix Logs_20140328.
package logs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"qshare"
	"qshare/auth"
	"qshare/aws/awsjson"
	"qshare/executor"
	"qshare/trainingjob"
)

// TargetPrefix is what X-Amz-Target holds before a CloudWatch Logs
// operation's name, and SigningName the service of its SigV4 credential
// scope.
const (
	TargetPrefix = "Logs_20140328"
	SigningName  = "logs"
)

// Group is the one log group: SageMaker's training jobs'.
const Group = "/aws/sagemaker/TrainingJobs"

// ActionPrefix is the service prefix of the IAM actions this endpoint
// authorizes (logs:GetLogEvents, logs:DescribeLogStreams).
const ActionPrefix = "logs:"

// maxEvent is the longest event: CloudWatch's limit of 256 KiB. A longer
// line is cut into events of this size.
const maxEvent = 256 << 10

// maxPage is the most bytes of events one GetLogEvents answer holds, as
// CloudWatch's 1 MB.
const maxPage = 1 << 20

// Jobs is what the endpoint asks of the daemon (*daemon.Daemon).
type Jobs interface {
	Region() string
	AccountID() string
	TrainingJob(name string) (*qshare.Job, qshare.Attempt, error)
	EachJob(f func(*qshare.Job) bool)
}

// Config is what New needs.
type Config struct {
	Jobs Jobs
	// Logs is the executor's Logs; InstanceLogs its InstanceLogs, or nil
	// when it keeps one log per attempt (then each attempt has one stream).
	Logs         func(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error)
	InstanceLogs func(ctx context.Context, attemptID string, instance int, follow bool) (io.ReadCloser, error)
	Log          *slog.Logger
}

var errorTable = awsjson.WithCommonErrors(map[qshare.ErrorCode]awsjson.ErrorType{
	qshare.EINVALID:  {Code: "InvalidParameterException", Status: http.StatusBadRequest},
	qshare.ECONFLICT: {Code: "InvalidParameterException", Status: http.StatusBadRequest},
	qshare.ENOTFOUND: {Code: "ResourceNotFoundException", Status: http.StatusBadRequest},
})

// New returns the CloudWatch Logs endpoint.
func New(cfg Config) *awsjson.Service {
	h := &handler{cfg: cfg}
	return &awsjson.Service{
		Name:         "CloudWatch Logs",
		TargetPrefix: TargetPrefix,
		Errors:       errorTable,
		Log:          cfg.Log,
		Ops: map[string]awsjson.Op{
			"DescribeLogStreams": awsjson.Handle(h.describeStreams),
			"GetLogEvents":       awsjson.Handle(h.getEvents),
		},
	}
}

// Actions returns the IAM actions this endpoint authorizes, sorted.
func Actions() []string {
	return []string{ActionPrefix + "DescribeLogStreams", ActionPrefix + "GetLogEvents"}
}

type handler struct{ cfg Config }

func (h *handler) groupARN() string {
	return "arn:aws:logs:" + h.cfg.Jobs.Region() + ":" + h.cfg.Jobs.AccountID() + ":log-group:" + Group
}

// group checks a request's log group, given by name or by identifier (a
// name or the group's ARN).
func (h *handler) group(name, identifier string) error {
	g := name
	if g == "" {
		g = identifier
		if _, after, ok := strings.Cut(identifier, ":log-group:"); ok && strings.HasPrefix(identifier, "arn:") {
			g = strings.TrimSuffix(after, ":*")
		}
	}
	if g == "" {
		return qshare.Errorf(qshare.EINVALID, "give logGroupName or logGroupIdentifier")
	}
	if g != Group {
		return qshare.Errorf(qshare.ENOTFOUND, "The specified log group does not exist: qshare keeps only %s", Group)
	}
	return nil
}

// stream is one instance of one attempt.
type stream struct {
	name     string
	job      *qshare.Job
	att      qshare.Attempt
	instance int // from 0
}

func streamName(job string, a qshare.Attempt, instance int) string {
	return fmt.Sprintf("%s/algo-%d-%d", job, instance+1, a.StartedAt.Unix())
}

// instances is how many streams an attempt has: one per instance when the
// executor keeps a log per instance, else one.
func (h *handler) instances(j *qshare.Job) int {
	if h.cfg.InstanceLogs == nil {
		return 1
	}
	n := 0
	for _, c := range j.Demand {
		n += int(c)
	}
	return max(n, 1)
}

// eachStream calls f with each stream of j's started attempts (only of
// attempt only, when not nil) whose training job name starts with prefix,
// or that prefix starts with.
func (h *handler) eachStream(j *qshare.Job, only *qshare.Attempt, prefix string, f func(stream)) {
	for _, a := range j.Attempts {
		if a.StartedAt.IsZero() || a.ResourceARN == "" || (only != nil && a.ID != only.ID) {
			continue
		}
		name := trainingjob.NameOfARN(a.ResourceARN)
		if !strings.HasPrefix(name, prefix) && !strings.HasPrefix(prefix, name) {
			continue // none of its streams can match: skip formatting their names
		}
		for k := range h.instances(j) {
			f(stream{streamName(name, a, k), j, a, k})
		}
	}
}

type describeIn struct {
	LogGroupName        string `json:"logGroupName"`
	LogGroupIdentifier  string `json:"logGroupIdentifier"`
	LogStreamNamePrefix string `json:"logStreamNamePrefix"`
	OrderBy             string `json:"orderBy"`
	Descending          bool   `json:"descending"`
	NextToken           string `json:"nextToken"`
	Limit               *int   `json:"limit"`
}

type streamOut struct {
	LogStreamName       string `json:"logStreamName"`
	CreationTime        int64  `json:"creationTime"`
	FirstEventTimestamp int64  `json:"firstEventTimestamp"`
	LastEventTimestamp  int64  `json:"lastEventTimestamp"`
	LastIngestionTime   int64  `json:"lastIngestionTime"`
	UploadSequenceToken string `json:"uploadSequenceToken,omitempty"`
	Arn                 string `json:"arn"`
	StoredBytes         int64  `json:"storedBytes"`
}

// limitOf is a request's limit member: 1 to most, and most when it is
// left out.
func limitOf(limit *int, most int) (int, error) {
	if limit == nil {
		return most, nil
	}
	if *limit < 1 || *limit > most {
		return 0, qshare.Errorf(qshare.EINVALID, "limit %d is out of range: use 1 to %d", *limit, most)
	}
	return *limit, nil
}

func (h *handler) describeStreams(ctx context.Context, in *describeIn) (any, error) {
	if err := h.group(in.LogGroupName, in.LogGroupIdentifier); err != nil {
		return nil, err
	}
	if err := auth.Authorize(ctx, ActionPrefix+"DescribeLogStreams", h.groupARN()+":*"); err != nil {
		return nil, err
	}
	limit, err := limitOf(in.Limit, 50)
	if err != nil {
		return nil, err
	}
	switch in.OrderBy {
	case "", "LogStreamName":
	case "LastEventTime":
		if in.LogStreamNamePrefix != "" {
			return nil, qshare.Errorf(qshare.EINVALID, "Cannot order by LastEventTime with a logStreamNamePrefix.")
		}
	default:
		return nil, qshare.Errorf(qshare.EINVALID, "orderBy %q is not valid: use LogStreamName or LastEventTime", awsjson.Short(in.OrderBy))
	}
	if in.NextToken != "" && !strings.HasPrefix(in.NextToken, "s/") {
		return nil, qshare.Errorf(qshare.EINVALID, "The specified nextToken is invalid: pass the nextToken of the previous answer unchanged")
	}
	after, hasAfter := strings.CutPrefix(in.NextToken, "s/")
	now := time.Now()
	key := func(s stream) string {
		if in.OrderBy == "LastEventTime" {
			return fmt.Sprintf("%020d/%s", lastEvent(s.att, now).UnixMilli(), s.name)
		}
		return s.name
	}
	before := func(a, b string) bool { // strictly: a page after a token never repeats its last stream
		if in.Descending {
			return a > b
		}
		return a < b
	}
	// matched keeps the page and one more stream (which says there is a
	// next page), in order: a call without a job's prefix looks at every
	// started attempt, but keeps and sorts only these.
	type keyed struct {
		k string
		s stream
	}
	matched := make([]keyed, 0, limit+1)
	consider := func(s stream) {
		if !strings.HasPrefix(s.name, in.LogStreamNamePrefix) {
			return
		}
		k := key(s)
		if (hasAfter && !before(after, k)) || (len(matched) == limit+1 && !before(k, matched[limit].k)) {
			return
		}
		at := sort.Search(len(matched), func(x int) bool { return before(k, matched[x].k) })
		if len(matched) < limit+1 {
			matched = append(matched, keyed{})
		}
		copy(matched[at+1:], matched[at:len(matched)-1])
		matched[at] = keyed{k, s}
	}
	// A prefix that names a training job (the SDK's "<job>/") needs only
	// that job; anything else looks at every job.
	if job, _, ok := strings.Cut(in.LogStreamNamePrefix, "/"); ok {
		if j, a, err := h.cfg.Jobs.TrainingJob(job); err == nil {
			h.eachStream(j, &a, "", consider)
		}
	} else {
		h.cfg.Jobs.EachJob(func(j *qshare.Job) bool {
			h.eachStream(j, nil, in.LogStreamNamePrefix, consider)
			return true
		})
	}
	out := map[string]any{}
	streams := []streamOut{}
	for i, m := range matched {
		s := m.s
		if i == limit {
			out["nextToken"] = "s/" + matched[i-1].k
			break
		}
		last := lastEvent(s.att, now).UnixMilli()
		streams = append(streams, streamOut{LogStreamName: s.name, CreationTime: s.att.StartedAt.UnixMilli(),
			FirstEventTimestamp: s.att.StartedAt.UnixMilli(), LastEventTimestamp: last, LastIngestionTime: last,
			Arn: h.groupARN() + ":log-stream:" + s.name})
	}
	out["logStreams"] = streams
	return out, nil
}

// lastEvent is when an attempt's stream last had an event, as far as the
// store knows: its end, or now while it runs.
func lastEvent(a qshare.Attempt, now time.Time) time.Time {
	if a.StoppedAt.IsZero() {
		return now
	}
	return a.StoppedAt
}

type eventsIn struct {
	LogGroupName       string `json:"logGroupName"`
	LogGroupIdentifier string `json:"logGroupIdentifier"`
	LogStreamName      string `json:"logStreamName"`
	StartTime          *int64 `json:"startTime"`
	EndTime            *int64 `json:"endTime"`
	NextToken          string `json:"nextToken"`
	Limit              *int   `json:"limit"`
	StartFromHead      *bool  `json:"startFromHead"`
}

type event struct {
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
	IngestionTime int64  `json:"ingestionTime"`
}

// findStream reads a stream's name back into its attempt and instance.
func (h *handler) findStream(name string) (stream, error) {
	notFound := qshare.Errorf(qshare.ENOTFOUND, "The specified log stream does not exist.")
	job, rest, ok := strings.Cut(name, "/algo-")
	if !ok {
		return stream{}, notFound
	}
	k, epoch, ok := strings.Cut(rest, "-")
	inst, err1 := strconv.Atoi(k)
	sec, err2 := strconv.ParseInt(epoch, 10, 64)
	if !ok || err1 != nil || err2 != nil || inst < 1 {
		return stream{}, notFound
	}
	j, a, err := h.cfg.Jobs.TrainingJob(job)
	if err != nil || a.StartedAt.IsZero() || a.StartedAt.Unix() != sec || inst > h.instances(j) {
		return stream{}, notFound
	}
	return stream{streamName(trainingjob.NameOfARN(a.ResourceARN), a, inst-1), j, a, inst - 1}, nil
}

// getEvents reads a stream's lines. A token is "f/N" or "b/N", N the byte
// offset in the instance's log where the next page starts (forward) or
// where the previous one ends (backward). Every line's timestamp is the
// attempt's start: the executors keep no time per line.
func (h *handler) getEvents(ctx context.Context, in *eventsIn) (any, error) {
	if err := h.group(in.LogGroupName, in.LogGroupIdentifier); err != nil {
		return nil, err
	}
	if in.LogStreamName == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "logStreamName is required")
	}
	if err := auth.Authorize(ctx, ActionPrefix+"GetLogEvents", h.groupARN()+":log-stream:"+in.LogStreamName); err != nil {
		return nil, err
	}
	limit, err := limitOf(in.Limit, 10000)
	if err != nil {
		return nil, err
	}
	forward := in.StartFromHead != nil && *in.StartFromHead
	var offset int64 = -1 // the end, for a backward read without a token
	if forward {
		offset = 0
	}
	if in.NextToken != "" {
		dir, n, ok := strings.Cut(in.NextToken, "/")
		v, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil || v < 0 || (dir != "f" && dir != "b") {
			return nil, qshare.Errorf(qshare.EINVALID, "The specified nextToken is invalid: pass nextForwardToken or nextBackwardToken of the previous answer unchanged")
		}
		forward, offset = dir == "f", v
	}
	s, err := h.findStream(in.LogStreamName)
	if err != nil {
		return nil, err
	}
	lines, first, next, err := h.read(ctx, s, forward, offset, limit)
	if err != nil {
		return nil, err
	}
	ts := s.att.StartedAt.UnixMilli()
	events := make([]event, 0, len(lines))
	for _, l := range lines {
		if (in.StartTime != nil && ts < *in.StartTime) || (in.EndTime != nil && ts >= *in.EndTime) {
			continue
		}
		events = append(events, event{Timestamp: ts, Message: l, IngestionTime: ts})
	}
	return map[string]any{"events": events, "nextForwardToken": fmt.Sprintf("f/%d", next), "nextBackwardToken": fmt.Sprintf("b/%d", first)}, nil
}

// read returns the lines of s's log from offset forward (or those before
// offset, the end when it is -1, backward), at most limit and maxPage
// bytes, with the offsets where they begin and end. A last line without
// its newline is held back while the attempt runs (the rest may come) and
// returned once it has ended.
func (h *handler) read(ctx context.Context, s stream, forward bool, offset int64, limit int) ([]string, int64, int64, error) {
	var (
		rc  io.ReadCloser
		err error
	)
	if s.instance == 0 {
		rc, err = h.cfg.Logs(ctx, s.att.ID, false)
	} else {
		rc, err = h.cfg.InstanceLogs(ctx, s.att.ID, s.instance, false)
	}
	if errors.Is(err, executor.ErrNoLog) || errors.Is(err, executor.ErrUnknownAttempt) {
		return nil, max(offset, 0), max(offset, 0), nil // an instance without output has no events
	}
	if err != nil {
		return nil, 0, 0, err
	}
	defer rc.Close()
	ended := !s.att.StoppedAt.IsZero()
	type line struct {
		text       string
		start, end int64
	}
	br := bufio.NewReaderSize(rc, maxEvent/4)
	var pos int64
	// next reads one event: a line, or maxEvent bytes of a longer one (a
	// multiple of the buffer's size, so a line never reads past it).
	next := func() (line, bool, error) {
		var b []byte
		for len(b) < maxEvent {
			chunk, err := br.ReadSlice('\n')
			b = append(b, chunk...)
			if err == nil {
				break
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if len(b) == 0 || !ended {
					return line{}, false, nil
				}
				break
			}
			return line{}, false, err
		}
		l := line{strings.TrimSuffix(string(b), "\n"), pos, pos + int64(len(b))}
		pos = l.end
		return l, true, nil
	}
	if forward {
		if _, err := io.CopyN(io.Discard, br, offset); err != nil && err != io.EOF {
			return nil, 0, 0, err
		}
		pos = offset
		var out []string
		size := 0
		for len(out) < limit && size < maxPage {
			l, ok, err := next()
			if err != nil {
				return nil, 0, 0, err
			}
			if !ok {
				break
			}
			out = append(out, l.text)
			size += len(l.text) + 26
		}
		return out, offset, pos, nil
	}
	// Backward: the last limit lines that end at or before offset.
	var ring []line
	for {
		l, ok, err := next()
		if err != nil {
			return nil, 0, 0, err
		}
		if !ok || (offset >= 0 && l.end > offset) {
			break
		}
		ring = append(ring, l)
		if len(ring) > limit {
			ring = ring[1:]
		}
	}
	end := pos
	if offset >= 0 && offset < end {
		end = offset
	}
	if len(ring) == 0 {
		return nil, end, end, nil
	}
	out := make([]string, len(ring))
	for i, l := range ring {
		out[i] = l.text
	}
	return out, ring[0].start, ring[len(ring)-1].end, nil
}
