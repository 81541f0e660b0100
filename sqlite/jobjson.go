package sqlite

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"qshare"
)

// marshalJob returns the JSON of j, without its payload, that json.Marshal
// would give for j with an empty payload, field for field: the same names,
// the same omitempty and omitzero rules, the same values once decoded (the
// bytes may differ: no HTML escaping, for one). The payload goes to a
// column of its own, as it is: it is JSON itself, and as a JSON string every
// quote in it had to be escaped again at each write.
//
// Every job change the server makes (a submit, and SCHEDULED, STARTING,
// RUNNING and the end of every attempt) writes the whole job, so this
// encoding runs four or five times per job; written out by hand it costs
// about a fifth of json.Marshal's CPU, which reflects on every field and
// checks every Marshaler on the way. A value it cannot encode exactly (a
// time outside the years 0 to 9999) goes to json.Marshal, so the error,
// too, is json.Marshal's. TestMarshalJob compares the two on random jobs
// and fails when Job or Attempt gains a field this function does not know.
func marshalJob(j *qshare.Job) ([]byte, error) {
	n := 512 + len(j.StatusReason) + len(j.ARN) + len(j.Name)
	for i := range j.Attempts {
		a := &j.Attempts[i]
		n += 256 + len(a.StatusReason) + len(a.ResourceARN) + len(a.LogPath) + len(a.Executor)*4/3
	}
	b, ok := appendJob(make([]byte, 0, n), j)
	if !ok {
		c := *j
		c.Payload = ""
		return json.Marshal(&c)
	}
	return b, nil
}

func appendJob(b []byte, j *qshare.Job) ([]byte, bool) {
	ok := true
	b = append(b, `{"id":`...)
	b = appendString(b, j.ID)
	b = append(b, `,"arn":`...)
	b = appendString(b, j.ARN)
	b = append(b, `,"name":`...)
	b = appendString(b, j.Name)
	b = append(b, `,"jobQueue":`...)
	b = appendString(b, j.JobQueue)
	if j.QuotaShare != "" {
		b = append(b, `,"quotaShare":`...)
		b = appendString(b, j.QuotaShare)
	}
	if j.ShareIdentifier != "" {
		b = append(b, `,"shareIdentifier":`...)
		b = appendString(b, j.ShareIdentifier)
	}
	b = append(b, `,"serviceJobType":`...)
	b = appendString(b, j.ServiceJobType)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(j.Priority), 10)
	b = append(b, `,"status":`...)
	b = appendString(b, string(j.Status))
	if j.StatusReason != "" {
		b = append(b, `,"statusReason":`...)
		b = appendString(b, j.StatusReason)
	}
	b = append(b, `,"demand":`...)
	b = appendCounts(b, j.Demand)
	if rs := j.RetryStrategy; rs != nil {
		b = append(b, `,"retryStrategy":{"attempts":`...)
		b = strconv.AppendInt(b, int64(rs.Attempts), 10)
		if len(rs.EvaluateOnExit) > 0 {
			b = append(b, `,"evaluateOnExit":[`...)
			for i, e := range rs.EvaluateOnExit {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, `{"action":`...)
				b = appendString(b, e.Action)
				if e.OnStatusReason != "" {
					b = append(b, `,"onStatusReason":`...)
					b = appendString(b, e.OnStatusReason)
				}
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	if j.PreemptionRetries != nil {
		b = append(b, `,"preemptionRetries":`...)
		b = strconv.AppendInt(b, int64(*j.PreemptionRetries), 10)
	}
	if j.AttemptDurationSeconds != 0 {
		b = append(b, `,"attemptDurationSeconds":`...)
		b = strconv.AppendInt(b, j.AttemptDurationSeconds, 10)
	}
	if len(j.Tags) > 0 {
		b = append(b, `,"tags":`...)
		b = appendTags(b, j.Tags)
	}
	if j.ClientToken != "" {
		b = append(b, `,"clientToken":`...)
		b = appendString(b, j.ClientToken)
	}
	if j.RequestHash != "" {
		b = append(b, `,"requestHash":`...)
		b = appendString(b, j.RequestHash)
	}
	b = append(b, `,"createdAt":`...)
	b = appendTime(b, j.CreatedAt, &ok)
	b = appendTimeField(b, `,"scheduledAt":`, j.ScheduledAt, &ok)
	b = appendTimeField(b, `,"startedAt":`, j.StartedAt, &ok)
	b = appendTimeField(b, `,"stoppedAt":`, j.StoppedAt, &ok)
	b = appendTimeField(b, `,"runnableSince":`, j.RunnableSince, &ok)
	if j.IsTerminated {
		b = append(b, `,"isTerminated":true`...)
	}
	if len(j.Attempts) > 0 {
		b = append(b, `,"attempts":[`...)
		for i := range j.Attempts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendAttempt(b, &j.Attempts[i], &ok)
		}
		b = append(b, ']')
	}
	if j.Preemptions != 0 {
		b = append(b, `,"preemptions":`...)
		b = strconv.AppendInt(b, int64(j.Preemptions), 10)
	}
	if j.FailedAttempts != 0 {
		b = append(b, `,"failedAttempts":`...)
		b = strconv.AppendInt(b, int64(j.FailedAttempts), 10)
	}
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, j.Version, 10)
	b = append(b, '}')
	return b, ok
}

func appendAttempt(b []byte, a *qshare.Attempt, ok *bool) []byte {
	b = append(b, `{"n":`...)
	b = strconv.AppendInt(b, int64(a.N), 10)
	b = append(b, `,"id":`...)
	b = appendString(b, a.ID)
	b = append(b, `,"resourceArn":`...)
	b = appendString(b, a.ResourceARN)
	b = append(b, `,"scheduledAt":`...)
	b = appendTime(b, a.ScheduledAt, ok)
	b = appendTimeField(b, `,"startedAt":`, a.StartedAt, ok)
	b = appendTimeField(b, `,"stoppedAt":`, a.StoppedAt, ok)
	if a.StatusReason != "" {
		b = append(b, `,"statusReason":`...)
		b = appendString(b, a.StatusReason)
	}
	if a.Preempted {
		b = append(b, `,"preempted":true`...)
	}
	if a.ExitCode != nil {
		b = append(b, `,"exitCode":`...)
		b = strconv.AppendInt(b, int64(*a.ExitCode), 10)
	}
	if a.LogPath != "" {
		b = append(b, `,"logPath":`...)
		b = appendString(b, a.LogPath)
	}
	if len(a.Executor) > 0 {
		b = append(b, `,"executor":"`...)
		b = base64.StdEncoding.AppendEncode(b, a.Executor)
		b = append(b, '"')
	}
	return append(b, '}')
}

// appendTimeField appends name and t unless t is zero (omitzero).
func appendTimeField(b []byte, name string, t time.Time, ok *bool) []byte {
	if t.IsZero() {
		return b
	}
	return appendTime(append(b, name...), t, ok)
}

// appendTime appends t as Time.MarshalJSON does (RFC 3339 with
// nanoseconds); it clears *ok for a time that has no such form.
func appendTime(b []byte, t time.Time, ok *bool) []byte {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		*ok = false
	}
	return append(b, '"')
}

// appendCounts appends a capacity as json.Marshal does: null when nil, the
// keys sorted.
func appendCounts(b []byte, c qshare.Capacity) []byte {
	if c == nil {
		return append(b, "null"...)
	}
	return appendObject(b, c, func(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) })
}

func appendTags(b []byte, m map[string]string) []byte {
	return appendObject(b, m, appendString)
}

// appendObject writes m as a JSON object with its keys sorted, as
// json.Marshal does, each value written by val.
func appendObject[V any](b []byte, m map[string]V, val func([]byte, V) []byte) []byte {
	var arr [16]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = val(b, m[k])
	}
	return append(b, '}')
}

// plain marks the ASCII bytes that stand for themselves in a JSON string.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as json.Marshal makes it.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
