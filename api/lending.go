package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"qshare"
	"qshare/auth"
	"qshare/daemon"
)

// LendingPath is where the server mounts LendingHandler (qshare.LendingPath).
// It is a qshare extension, outside the AWS Batch operations (which live
// under /v1/): the AWS API says how much each quota share uses, not whose
// capacity a borrower occupies.
const LendingPath = qshare.LendingPath

// maxQueueRef bounds the jobQueue parameter: a name has at most 128
// characters, and an ARN adds a region, an account and a prefix to it.
const maxQueueRef = 512

// LendingResponse is the body of a successful GET LendingPath.
type LendingResponse struct {
	// JobQueues has one entry per job queue, in name order.
	JobQueues []qshare.Lending `json:"jobQueues"`
}

// LendingHandler serves GET LendingPath[?jobQueue=NAME_OR_ARN]: who lends to
// whom, as the scheduler attributes it, in the named job queue or in every
// job queue with a quota-share policy. Errors use the AWS error format and
// the one error table: an unknown or malformed queue, an unknown parameter
// or another method is a ClientException (400) that says which.
func LendingHandler(d *daemon.Daemon) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref, ok := jobQueueParam(w, r, LendingPath, false)
		if !ok {
			return
		}
		res := "*"
		if ref != "" {
			res = refARN(ref, d.QueueARN)
		}
		if err := auth.Authorize(r.Context(), ActionGetLending, res); err != nil {
			writeError(w, err)
			return
		}
		ls, err := d.Lending(ref)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, LendingResponse{JobQueues: readableShares(r.Context(), d, ls)})
	})
}

// readableShares returns ls with only the quota shares the caller may
// read (batch:DescribeQuotaShare on the share's ARN): with authentication,
// each principal sees the bars of its own shares, not every team's. The
// queue's capacity, and the names of the shares a visible share borrows
// from or lends to, stay. ls is not changed.
func readableShares(ctx context.Context, d *daemon.Daemon, ls []qshare.Lending) []qshare.Lending {
	if auth.PrincipalFrom(ctx) == nil {
		return ls
	}
	out := make([]qshare.Lending, len(ls))
	for i, l := range ls {
		out[i] = l
		out[i].QuotaShares = make([]qshare.ShareLending, 0, len(l.QuotaShares))
		for _, s := range l.QuotaShares {
			if auth.May(ctx, actionPrefix+"DescribeQuotaShare", d.ShareARN(l.JobQueue, s.QuotaShareName)) {
				out[i].QuotaShares = append(out[i].QuotaShares, s)
			}
		}
	}
	return out
}

// jobQueueParam checks the request of an extension endpoint served at path
// that takes one parameter, jobQueue (a job queue name or ARN; required, or
// absent for every queue): the method (GET or HEAD), the path, the query
// string and the parameter. It returns the parameter ("" when it is absent
// and not required), or writes the ClientException (or, for another path
// below the endpoint, the not-found error) that says what is wrong and
// returns false.
func jobQueueParam(w http.ResponseWriter, r *http.Request, path string, required bool) (string, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, qshare.Errorf(qshare.EINVALID, "%s is not allowed on %s: use GET", r.Method, path))
		return "", false
	}
	if r.URL.Path != path {
		writeError(w, qshare.Errorf(qshare.ENOTFOUND, "no such extension endpoint: use GET %s?jobQueue=NAME", path))
		return "", false
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, qshare.Errorf(qshare.EINVALID, "the query string is not valid: escape it, as ?jobQueue=NAME_OR_ARN"))
		return "", false
	}
	for k := range q {
		if k != "jobQueue" {
			writeError(w, qshare.Errorf(qshare.EINVALID, "query parameter %q is not known: the only one is jobQueue", k))
			return "", false
		}
	}
	ref := q.Get("jobQueue")
	switch {
	case required && (len(q["jobQueue"]) != 1 || ref == ""):
		writeError(w, qshare.Errorf(qshare.EINVALID, "jobQueue is required, once: give a job queue name or ARN, as ?jobQueue=NAME"))
		return "", false
	case len(q["jobQueue"]) > 1:
		writeError(w, qshare.Errorf(qshare.EINVALID, "jobQueue is given %d times: give it once, or not at all for every queue", len(q["jobQueue"])))
		return "", false
	case q.Has("jobQueue") && ref == "":
		writeError(w, qshare.Errorf(qshare.EINVALID, "jobQueue is empty: give a job queue name or ARN, or leave the parameter out for every queue"))
		return "", false
	}
	if len(ref) > maxQueueRef {
		writeError(w, qshare.Errorf(qshare.EINVALID, "jobQueue is %d bytes long: give a job queue name (at most 128 characters) or its ARN", len(ref)))
		return "", false
	}
	if ref != "" && !strings.HasPrefix(ref, "arn:") {
		if err := qshare.ValidateName("jobQueue", ref); err != nil {
			writeError(w, err)
			return "", false
		}
	}
	return ref, true
}
