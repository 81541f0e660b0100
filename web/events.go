package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"qshare"
	"qshare/api"
	"qshare/event"
)

// EventsPath is where the server mounts EventsHandler: a qshare extension
// with no AWS Batch counterpart.
const EventsPath = "/qshare/v1/events"

// maxEvents bounds one answer: the newest ones are kept.
const maxEvents = 5000

// EventsFunc calls fn with every event of the server's event log, oldest
// first, as (*event.File).Events does.
type EventsFunc func(fn func(event.Event)) error

// EventsResponse is the body of a successful GET EventsPath.
type EventsResponse struct {
	// Enabled is false when the server keeps no event log it can read
	// (qshare serve without --events FILE); Events is then empty.
	Enabled bool `json:"enabled"`
	// Since is the start of the window, in Unix seconds.
	Since float64 `json:"since"`
	// Truncated is true when older events of the window were left out.
	Truncated bool `json:"truncated,omitempty"`
	// Events are the starts, preemptions, finishes and failures since
	// Since, oldest first, at most 5,000 (the newest).
	Events []Event `json:"events"`
}

// Event is one line of the event log, with the names of its jobs.
type Event struct {
	event.Event
	// JobName is the name of Job, and ForName that of For, while the
	// server still keeps the job; empty once it is gone.
	JobName string `json:"jobName,omitempty"`
	ForName string `json:"forName,omitempty"`
}

// NameFunc returns the name of the job with the given id as the caller of
// the request ctx belongs to may read it: "" for a job the server does not
// keep, or one the caller may not describe (an event of its own job names
// in For the job it was preempted for, which may be another team's).
type NameFunc func(ctx context.Context, id string) string

// VisibleFunc reports whether the caller of the request ctx belongs to may
// see event e (with authentication: whether it may describe e's job).
type VisibleFunc func(ctx context.Context, e event.Event) bool

// EventsHandler serves GET EventsPath[?since=UNIX_SECONDS]: the capacity
// events of the last hour (or since the given time, at most a day back).
// read is nil when there is no event log; visible, when not nil, leaves
// out the events the caller may not see. Errors use the AWS error format: a
// since that is not a number, or too old, an unknown parameter, or another
// method is a ClientException (400) that says which.
func EventsHandler(read EventsFunc, name NameFunc, visible VisibleFunc, now func() time.Time) http.Handler {
	if name == nil {
		name = func(context.Context, string) string { return "" }
	}
	if now == nil {
		now = time.Now
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "%s is not allowed on %s: use GET", r.Method, EventsPath))
			return
		}
		if r.URL.Path != EventsPath {
			api.WriteError(w, qshare.Errorf(qshare.ENOTFOUND, "no such extension endpoint: use GET %s?since=UNIX_SECONDS", EventsPath))
			return
		}
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "the query string is not valid: give ?since=UNIX_SECONDS"))
			return
		}
		for k := range q {
			if k != "since" {
				api.WriteError(w, qshare.Errorf(qshare.EINVALID, "query parameter %q is not known: the only one is since", k))
				return
			}
		}
		t := float64(now().UnixMilli()) / 1000
		since := t - 3600
		if q.Has("since") {
			s, err := strconv.ParseFloat(q.Get("since"), 64)
			if len(q["since"]) != 1 || err != nil || s != s {
				api.WriteError(w, qshare.Errorf(qshare.EINVALID, "since must be one time in Unix seconds, such as %d", int64(t)-3600))
				return
			}
			if s < t-86400 {
				api.WriteError(w, qshare.Errorf(qshare.EINVALID, "since is more than a day back: the dashboard's timeline reads at most the last 24 hours (qshare check-events reads the whole log)"))
				return
			}
			since = s
		}
		out := EventsResponse{Enabled: read != nil, Since: since, Events: []Event{}}
		if read != nil {
			err := read(func(e event.Event) {
				if e.T < since {
					return
				}
				switch e.Event {
				case event.Start, event.Preempt, event.Finish, event.Fail:
				default:
					return
				}
				if visible != nil && !visible(r.Context(), e) {
					return
				}
				out.Events = append(out.Events, Event{Event: e})
			})
			var bad *event.BadLinesError
			if err != nil && !asBad(err, &bad) {
				api.WriteError(w, qshare.Errorf(qshare.EINTERNAL, "the event log could not be read: %v", rootCause(err)))
				return
			}
		}
		if n := len(out.Events); n > maxEvents {
			out.Events, out.Truncated = out.Events[n-maxEvents:], true
		}
		names := map[string]string{}
		named := func(id string) string {
			if id == "" {
				return ""
			}
			n, ok := names[id]
			if !ok {
				n = name(r.Context(), id)
				names[id] = n
			}
			return n
		}
		for i := range out.Events {
			out.Events[i].JobName, out.Events[i].ForName = named(out.Events[i].Job), named(out.Events[i].For)
		}
		writeJSON(w, out)
	})
}
