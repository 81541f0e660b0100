package jsonload

import (
	"qshare"
	"qshare/store"
)

// State reads everything a store holds, as a store's Load returns it: the
// environments, policies, queues and plans in name order, the shares by
// queue and name, the jobs in CreatedAt order with ties broken by ID. query
// runs one SELECT (inside the caller's transaction) and returns its rows and
// the function that closes them. Each table holds a record's JSON in its
// data column; the jobs table also has a payload column, of type X, which
// payload turns into the job's Payload. On failure State returns the name of
// the table it was reading, for the caller's message.
func State[X any](query func(sql string) (Rows, func(), error), payload func(X) string) (st *store.State, table string, err error) {
	st = &store.State{}
	if st.Environments, err = load[qshare.ServiceEnvironment, X](query, `SELECT data FROM environments ORDER BY name`, nil); err != nil {
		return nil, "environments", err
	}
	if st.Policies, err = load[qshare.SchedulingPolicy, X](query, `SELECT data FROM policies ORDER BY name`, nil); err != nil {
		return nil, "policies", err
	}
	if st.Queues, err = load[qshare.JobQueue, X](query, `SELECT data FROM queues ORDER BY name`, nil); err != nil {
		return nil, "queues", err
	}
	if st.Shares, err = load[qshare.QuotaShare, X](query, `SELECT data FROM shares ORDER BY queue, name`, nil); err != nil {
		return nil, "shares", err
	}
	if st.Plans, err = load[qshare.CapacityPlan, X](query, `SELECT data FROM plans ORDER BY name`, nil); err != nil {
		return nil, "plans", err
	}
	setPayload := func(j *qshare.Job, x X) { j.Payload = payload(x) }
	if st.Jobs, err = load(query, `SELECT data, payload FROM jobs ORDER BY created_at, id`, setPayload); err != nil {
		return nil, "jobs", err
	}
	return st, "", nil
}

// load runs sql through query and decodes its rows (Decode).
func load[T, X any](query func(sql string) (Rows, func(), error), sql string, extra func(*T, X)) ([]T, error) {
	rows, done, err := query(sql)
	if err != nil {
		return nil, err
	}
	defer done()
	return Decode(rows, extra)
}
