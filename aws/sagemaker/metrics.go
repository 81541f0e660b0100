package sagemaker

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"regexp"
	"strconv"
	"time"

	"qshare"
)

// LogsFunc is an executor's Logs (executor.Executor.Logs): the output of an
// attempt, from its start, without follow.
type LogsFunc func(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error)

// SageMaker's limits on AlgorithmSpecification.MetricDefinitions: at most 40
// definitions, a regex of at most 500 characters.
const (
	maxMetrics     = 40
	maxMetricRegex = 500
)

// maxMetricLog is how much of an attempt's log the metrics are read from:
// its first 64 MiB. A longer log's later values are not seen.
const maxMetricLog = 64 << 20

type metricDef struct {
	Name  string `json:"Name"`
	Regex string `json:"Regex"`
}

type metricData struct {
	MetricName string  `json:"MetricName"`
	Value      float64 `json:"Value"`
	Timestamp  epoch   `json:"Timestamp"`
}

// MetricValue is one entry of a training job's FinalMetricDataList.
type MetricValue struct {
	Name  string
	Value float64
}

// FinalMetrics is the FinalMetricDataList of attempt a of the job whose
// serviceRequestPayload is payload, as DescribeTrainingJob gives it (see
// finalMetrics), for the other views of the same values: the server's
// /metrics. It reads the attempt's log through logs; a payload without
// MetricDefinitions costs no read.
func FinalMetrics(ctx context.Context, logs LogsFunc, a qshare.Attempt, payload string) []MetricValue {
	var p map[string]json.RawMessage
	if json.Unmarshal([]byte(payload), &p) != nil {
		return nil
	}
	var out []MetricValue
	for _, m := range finalMetrics(ctx, logs, a, p, a.StoppedAt) {
		out = append(out, MetricValue{m.MetricName, m.Value})
	}
	return out
}

// finalMetrics is FinalMetricDataList: for each of the payload's
// MetricDefinitions, the value of its regex's last match in the attempt's
// log (its first group, or the whole match without one), as SageMaker reads
// the metrics out of a job's output. A definition whose regex does not
// compile (SageMaker's are Java's; qshare reads them as RE2, which takes the
// usual ones), or that never matches a number, gives nothing. The
// timestamp is the attempt's end, or now while it runs.
func finalMetrics(ctx context.Context, logs LogsFunc, a qshare.Attempt, payload map[string]json.RawMessage, now time.Time) []metricData {
	if logs == nil || a.StartedAt.IsZero() {
		return nil
	}
	var alg struct {
		MetricDefinitions []metricDef `json:"MetricDefinitions"`
	}
	if json.Unmarshal(payload["AlgorithmSpecification"], &alg) != nil || len(alg.MetricDefinitions) == 0 {
		return nil
	}
	type def struct {
		name string
		re   *regexp.Regexp
	}
	var defs []def
	for i, d := range alg.MetricDefinitions {
		if i == maxMetrics || len(d.Regex) > maxMetricRegex || d.Name == "" {
			break
		}
		if re, err := regexp.Compile(d.Regex); err == nil {
			defs = append(defs, def{d.Name, re})
		}
	}
	if len(defs) == 0 {
		return nil
	}
	rc, err := logs(ctx, a.ID, false)
	if err != nil {
		return nil // no log (the simulated executor), or none any more
	}
	defer rc.Close()
	last := make([]*float64, len(defs))
	sc := bufio.NewScanner(io.LimitReader(rc, maxMetricLog))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		for i, d := range defs {
			m := d.re.FindSubmatch(line)
			if m == nil {
				continue
			}
			s := m[0]
			if len(m) > 1 {
				s = m[1]
			}
			if f, err := strconv.ParseFloat(string(s), 64); err == nil {
				last[i] = &f
			}
		}
	}
	at := a.StoppedAt
	if at.IsZero() {
		at = now
	}
	var out []metricData
	for i, d := range defs {
		if last[i] != nil {
			out = append(out, metricData{MetricName: d.name, Value: *last[i], Timestamp: epoch(at)})
		}
	}
	return out
}
