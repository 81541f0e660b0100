package sqlite

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"qshare"
	"qshare/store/storetest"
)

// TestMarshalJob checks that marshalJob's JSON decodes to exactly what
// json.Marshal's does, for the suite's full job and for random ones (odd
// strings, zero and non-zero times, nil and empty collections).
func TestMarshalJob(t *testing.T) {
	// Fields marshalJob writes; a new field in Job or Attempt must be added
	// to it (and here), or jobs would lose it in the store.
	jobFields := "ID ARN Name JobQueue QuotaShare ShareIdentifier ServiceJobType Priority Status StatusReason Payload Demand " +
		"RetryStrategy PreemptionRetries AttemptDurationSeconds Tags ClientToken RequestHash CreatedAt ScheduledAt StartedAt " +
		"StoppedAt RunnableSince IsTerminated Attempts Preemptions FailedAttempts Version"
	attemptFields := "N ID ResourceARN ScheduledAt StartedAt StoppedAt StatusReason Preempted ExitCode LogPath Executor"
	for _, c := range []struct {
		typ  reflect.Type
		want string
	}{{reflect.TypeFor[qshare.Job](), jobFields}, {reflect.TypeFor[qshare.Attempt](), attemptFields},
		{reflect.TypeFor[qshare.RetryStrategy](), "Attempts EvaluateOnExit"}, {reflect.TypeFor[qshare.EvaluateOnExit](), "Action OnStatusReason"}} {
		var got []string
		for f := range c.typ.Fields() {
			got = append(got, f.Name)
		}
		if strings.Join(got, " ") != c.want {
			t.Fatalf("%s has the fields %v; marshalJob (sqlite/jobjson.go) writes %s: teach it the new ones", c.typ, got, c.want)
		}
	}

	check := func(t interface {
		Fatalf(string, ...any)
		Fatal(...any)
	}, j *qshare.Job) {
		// The payload has a column of its own: the JSON is the job's
		// without it.
		nopayload := *j
		nopayload.Payload = ""
		want, werr := json.Marshal(&nopayload)
		got, gerr := marshalJob(j)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("json.Marshal error %v, marshalJob error %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		var a, b qshare.Job
		if err := json.Unmarshal(want, &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &b); err != nil {
			t.Fatalf("marshalJob wrote invalid JSON: %v\n%s", err, got)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("marshalJob differs from json.Marshal:\n got %s\nwant %s", got, want)
		}
		if j.Payload != "" && strings.Contains(string(got), `"payload"`) {
			t.Fatalf("marshalJob wrote the payload, which has a column of its own:\n%s", got)
		}
	}
	full := storetest.FullJob("j1", time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.FixedZone("x", 19800)))
	check(t, &full)
	check(t, &qshare.Job{})
	bad := full
	bad.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	check(t, &bad)

	str := rapid.OneOf(rapid.String(), rapid.StringOf(rapid.RuneFrom([]rune{'"', '\\', '\n', '\t', 0, 0x1f, 0x7f, '<', '&', 'é', '\u2028', 0xfffd})),
		rapid.SampledFrom([]string{"", "\xff", "a\xc3", "\xed\xa0\x80", "ok"}))
	tm := rapid.Custom(func(t *rapid.T) time.Time {
		if rapid.Bool().Draw(t, "zero") {
			return time.Time{}
		}
		return time.Unix(rapid.Int64Range(-1e11, 2e11).Draw(t, "s"), rapid.Int64Range(0, 999999999).Draw(t, "ns")).
			In(time.FixedZone("z", rapid.IntRange(-50000, 50000).Draw(t, "off")))
	})
	rapid.Check(t, func(rt *rapid.T) {
		j := qshare.Job{ID: str.Draw(rt, "id"), ARN: str.Draw(rt, "arn"), Name: str.Draw(rt, "name"), JobQueue: str.Draw(rt, "q"),
			QuotaShare: str.Draw(rt, "share"), ShareIdentifier: str.Draw(rt, "sid"), ServiceJobType: str.Draw(rt, "type"),
			Priority: rapid.Int().Draw(rt, "prio"), Status: qshare.JobStatus(str.Draw(rt, "status")), StatusReason: str.Draw(rt, "reason"),
			Payload: str.Draw(rt, "payload"), AttemptDurationSeconds: rapid.Int64().Draw(rt, "ads"), ClientToken: str.Draw(rt, "tok"),
			RequestHash: str.Draw(rt, "hash"), CreatedAt: tm.Draw(rt, "created"), ScheduledAt: tm.Draw(rt, "sched"),
			StartedAt: tm.Draw(rt, "started"), StoppedAt: tm.Draw(rt, "stopped"), RunnableSince: tm.Draw(rt, "runnable"),
			IsTerminated: rapid.Bool().Draw(rt, "term"), Preemptions: rapid.Int().Draw(rt, "pre"), FailedAttempts: rapid.Int().Draw(rt, "fail"),
			Version: rapid.Int64().Draw(rt, "v")}
		if rapid.Bool().Draw(rt, "hasDemand") {
			j.Demand = rapid.MapOf(str, rapid.Int64()).Draw(rt, "demand")
		}
		if rapid.Bool().Draw(rt, "hasTags") {
			j.Tags = rapid.MapOf(str, str).Draw(rt, "tags")
		}
		if rapid.Bool().Draw(rt, "hasRetry") {
			j.RetryStrategy = &qshare.RetryStrategy{Attempts: rapid.Int().Draw(rt, "attempts")}
			for range rapid.IntRange(0, 3).Draw(rt, "rules") {
				j.RetryStrategy.EvaluateOnExit = append(j.RetryStrategy.EvaluateOnExit,
					qshare.EvaluateOnExit{Action: str.Draw(rt, "action"), OnStatusReason: str.Draw(rt, "on")})
			}
		}
		if rapid.Bool().Draw(rt, "hasPR") {
			n := rapid.Int().Draw(rt, "pr")
			j.PreemptionRetries = &n
		}
		for range rapid.IntRange(0, 3).Draw(rt, "nattempts") {
			a := qshare.Attempt{N: rapid.Int().Draw(rt, "n"), ID: str.Draw(rt, "aid"), ResourceARN: str.Draw(rt, "rarn"),
				ScheduledAt: tm.Draw(rt, "asched"), StartedAt: tm.Draw(rt, "astarted"), StoppedAt: tm.Draw(rt, "astopped"),
				StatusReason: str.Draw(rt, "areason"), Preempted: rapid.Bool().Draw(rt, "preempted"), LogPath: str.Draw(rt, "log")}
			if rapid.Bool().Draw(rt, "hasExit") {
				n := rapid.Int().Draw(rt, "exit")
				a.ExitCode = &n
			}
			if rapid.Bool().Draw(rt, "hasExecutor") {
				a.Executor = rapid.SliceOf(rapid.Byte()).Draw(rt, "executor")
			}
			j.Attempts = append(j.Attempts, a)
		}
		check(rt, &j)
	})
}

func BenchmarkMarshalJob(b *testing.B) {
	j := storetest.FullJob("0196f0c2-3a4b-7c5d-8e9f-0123456789ab", time.Now())
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			c := j
			c.Payload = ""
			_, _ = json.Marshal(&c)
		}
	})
	b.Run("marshalJob", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_, _ = marshalJob(&j)
		}
	})
}
