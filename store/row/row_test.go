package row

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/store"
	"qshare/store/storetest"
)

// TestMarshalJobLeavesThePayloadOut checks that the data column holds the
// whole job but its payload, which has a column of its own.
func TestMarshalJobLeavesThePayloadOut(t *testing.T) {
	full := storetest.FullJob("j1", time.Date(2026, 3, 1, 12, 30, 45, 123456789, time.FixedZone("x", 19800)))
	if full.Payload == "" {
		t.Fatal("the suite's full job has no payload")
	}
	b, err := MarshalJob(&full)
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
		t.Fatalf("MarshalJob lost part of the job:\n got %+v\nwant %+v", got, want)
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

// TestEncodeRefusesEmptyKeys: a record without its key fails the whole
// change, with an error that names the record's kind and place.
func TestEncodeRefusesEmptyKeys(t *testing.T) {
	for _, tc := range []struct {
		c    store.Change
		want string
	}{
		{store.Change{PutEnvironments: []qshare.ServiceEnvironment{{Name: "e"}, {}}}, "put service environment #2 has an empty name"},
		{store.Change{PutPolicies: []qshare.SchedulingPolicy{{}}}, "put scheduling policy #1 has an empty name"},
		{store.Change{PutQueues: []qshare.JobQueue{{Name: "q"}, {Name: "r"}, {}}}, "put job queue #3 has an empty name"},
		{store.Change{PutShares: []qshare.QuotaShare{{Name: "A"}}}, "put quota share #1"},
	} {
		if _, err := Encode(&tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Encode = %v, want an error containing %q", err, tc.want)
		}
	}
	enc, err := Encode(&store.Change{PutEnvironments: []qshare.ServiceEnvironment{{Name: "e"}}, PutQueues: []qshare.JobQueue{{Name: "q"}}})
	if err != nil || len(enc.PutEnvs) != 1 || enc.PutEnvs[0].Key != "e" || len(enc.PutQueues) != 1 || enc.PutQueues[0].Key != "q" {
		t.Fatalf("Encode of named records = %+v, %v", enc, err)
	}
}
