package sqlite

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"qshare"
	"qshare/store/storetest"
)

// TestMarshalJobLeavesThePayloadOut checks that the data column holds the
// whole job but its payload, which has a column of its own.
func TestMarshalJobLeavesThePayloadOut(t *testing.T) {
	full := storetest.FullJob("j1", time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.FixedZone("x", 19800)))
	if full.Payload == "" {
		t.Fatal("the suite's full job has no payload")
	}
	b, err := marshalJob(&full)
	if err != nil {
		t.Fatal(err)
	}
	var got qshare.Job
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Payload != "" {
		t.Fatalf("the data column holds the payload %q", got.Payload)
	}
	want := full
	want.Payload = ""
	// Times come back in the zone json.Marshal wrote; compare them as instants.
	if !reflect.DeepEqual(normal(got), normal(want)) {
		t.Fatalf("marshalJob lost part of the job:\n got %+v\nwant %+v", got, want)
	}
}

func normal(j qshare.Job) qshare.Job {
	u := func(t time.Time) time.Time {
		if t.IsZero() {
			return t
		}
		return t.UTC()
	}
	j.CreatedAt, j.ScheduledAt, j.StartedAt, j.StoppedAt, j.RunnableSince = u(j.CreatedAt), u(j.ScheduledAt), u(j.StartedAt), u(j.StoppedAt), u(j.RunnableSince)
	j.Attempts = append([]qshare.Attempt(nil), j.Attempts...)
	for i := range j.Attempts {
		a := &j.Attempts[i]
		a.ScheduledAt, a.StartedAt, a.StoppedAt = u(a.ScheduledAt), u(a.StartedAt), u(a.StoppedAt)
	}
	return j
}
