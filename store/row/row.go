// Package row turns a store.Change into the rows that the SQL stores
// (sqlite/, postgres/) write: each record's key columns and its JSON, and a
// job's payload beside its JSON. Both stores have the same tables and
// columns (docs/store.md, "Schema"), so they share one encoding, which a
// store's Commit runs in the caller's goroutine before it queues the change:
// encoding runs on every core, and an invalid change (an empty key) fails
// without touching the database.
package row

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unsafe"

	"qshare"
	"qshare/store"
)

// Change is a store.Change turned into the rows it writes: its puts, then
// its deletes. Nothing in it refers to the store.Change, which the caller
// may reuse once Commit returns.
type Change struct {
	PutEnvs, PutPolicies, PutQueues []Keyed
	PutShares                       []Share
	PutPlans                        []Keyed
	PutJobs                         []Job
	DelEnvs, DelPolicies, DelQueues []string
	DelShares                       []store.ShareKey
	DelPlans                        []string
	DelJobs                         []string
	// Rows is the number of records put or deleted.
	Rows int
}

// Keyed is the row of a record keyed by its name (an environment, a
// policy, a queue, a capacity plan).
type Keyed struct{ Key, Data string }

// Share is the row of a quota share, keyed by its queue and name.
type Share struct{ Queue, Name, Data string }

// Job is the row of a job: its key and the columns queries need, its JSON
// without the payload (MarshalJob) and the payload as it is.
type Job struct {
	ID, Queue, Share, Status string
	Created                  string // TimeKey(CreatedAt)
	Version                  int64
	Data                     string // the job's JSON, without its payload
	Payload                  string
}

// EncodeFor is Encode for a store's Commit under ctx: once ctx has ended
// it returns ctx's error and encodes nothing.
func EncodeFor(ctx context.Context, c *store.Change) (*Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return Encode(c)
}

// Encode validates c and turns it into rows. A record with an empty key
// fails the whole change, with an error that names its kind and place. A
// nil c is an empty change.
func Encode(c *store.Change) (*Change, error) {
	if c == nil {
		return &Change{}, nil
	}
	e := &Change{}
	var err error
	if e.PutEnvs, err = encodeNamed(c.PutEnvironments, "service environment", func(v *qshare.ServiceEnvironment) string { return v.Name }); err != nil {
		return nil, err
	}
	if e.PutPolicies, err = encodeNamed(c.PutPolicies, "scheduling policy", func(v *qshare.SchedulingPolicy) string { return v.Name }); err != nil {
		return nil, err
	}
	if e.PutQueues, err = encodeNamed(c.PutQueues, "job queue", func(v *qshare.JobQueue) string { return v.Name }); err != nil {
		return nil, err
	}
	if e.PutPlans, err = encodeNamed(c.PutPlans, "capacity plan", func(v *qshare.CapacityPlan) string { return v.Name }); err != nil {
		return nil, err
	}
	for i := range c.PutShares {
		v := &c.PutShares[i]
		if v.Name == "" || v.JobQueue == "" {
			return nil, fmt.Errorf("put quota share #%d (%q of queue %q) has an empty key; a share needs its name and its job queue", i+1, v.Name, v.JobQueue)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode quota share %q of queue %q: %w", v.Name, v.JobQueue, err)
		}
		e.PutShares = append(e.PutShares, Share{Queue: v.JobQueue, Name: v.Name, Data: ownedString(b)})
	}
	if len(c.PutJobs) > 0 {
		e.PutJobs = make([]Job, 0, len(c.PutJobs))
	}
	for i := range c.PutJobs {
		v := &c.PutJobs[i]
		if v.ID == "" {
			return nil, fmt.Errorf("put job #%d (%q) has an empty ID; every job needs one", i+1, v.Name)
		}
		b, err := MarshalJob(v)
		if err != nil {
			return nil, fmt.Errorf("encode job %q: %w", v.ID, err)
		}
		e.PutJobs = append(e.PutJobs, Job{
			ID: v.ID, Queue: v.JobQueue, Share: v.QuotaShare, Status: string(v.Status),
			Created: TimeKey(v.CreatedAt), Version: v.Version, Data: ownedString(b), Payload: v.Payload,
		})
	}
	// Copy the delete keys: the caller may reuse its Change once Commit
	// returns, and a cancelled Commit returns before the writer is done.
	e.DelEnvs = append([]string(nil), c.DeleteEnvironments...)
	e.DelPolicies = append([]string(nil), c.DeletePolicies...)
	e.DelQueues = append([]string(nil), c.DeleteQueues...)
	e.DelShares = append([]store.ShareKey(nil), c.DeleteShares...)
	e.DelPlans = append([]string(nil), c.DeletePlans...)
	e.DelJobs = append([]string(nil), c.DeleteJobs...)
	e.Rows = len(e.PutEnvs) + len(e.PutPolicies) + len(e.PutQueues) + len(e.PutShares) + len(e.PutPlans) + len(e.PutJobs) +
		len(e.DelEnvs) + len(e.DelPolicies) + len(e.DelQueues) + len(e.DelShares) + len(e.DelPlans) + len(e.DelJobs)
	return e, nil
}

// encodeNamed encodes records keyed by their name; what is their kind, for
// the errors ("job queue"). A record without a name fails them all.
func encodeNamed[T any](vs []T, what string, name func(*T) string) ([]Keyed, error) {
	var rows []Keyed
	for i := range vs {
		v := &vs[i]
		n := name(v)
		if n == "" {
			return nil, fmt.Errorf("put %s #%d has an empty name; every record needs its key", what, i+1)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode %s %q: %w", what, n, err)
		}
		rows = append(rows, Keyed{Key: n, Data: ownedString(b)})
	}
	return rows, nil
}

// MarshalJob returns the JSON of j for the jobs table's data column: j as
// json.Marshal writes it, with an empty payload. The payload goes to a
// column of its own, as it is: it is JSON itself, and as a JSON string
// every quote in it had to be escaped again at each write.
//
// A hand-written encoder stood here (in sqlite/) until it was measured
// against json.Marshal with the end-to-end submit benchmark: it bought
// about 5% of the server's CPU per submit and no measurable submit
// throughput, short of the 10% that would earn code which silently loses a
// field nobody taught it (docs/performance.md, "Hand-written codecs").
func MarshalJob(j *qshare.Job) ([]byte, error) {
	c := *j
	c.Payload = ""
	return json.Marshal(&c)
}

// TimeKey formats t as a fixed-width UTC string whose byte order is the
// order of the instants, for every year from 0 to 9999: the created_at
// column, by which Load orders jobs.
func TimeKey(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000000Z")
}

// ownedString returns b as a string without copying it. b must be a fresh
// buffer that nothing else holds or changes (json.Marshal's result is one):
// a record is about 1 KB, and the copy was a tenth of a submit's garbage.
func ownedString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
