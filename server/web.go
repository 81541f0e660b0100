package server

import (
	"context"
	"net/http"

	"qshare/api"
	"qshare/auth"
	"qshare/daemon"
	"qshare/event"
	"qshare/web"
)

// routeDashboard registers the dashboard (package web) at /ui/ and the
// read-only extensions it needs beside the lending one: the front of a
// queue with each job's reason (api.QueuePath), the event log's last hour
// (web.EventsPath) and the caller's principal (web.WhoAmIPath). Like the
// API they wait behind the readiness gate. With --auth, the page's files
// are served unsigned (Public) and the page signs its requests for data.
// The timeline reads an --events FILE; with no event log, or one kept in
// the store, it says there is none. With --auth it needs batch:GetEvents,
// and shows each principal the events of the jobs it may describe.
func routeDashboard(r *Router, own string) {
	r.Handle(Route{Name: "dashboard", Match: Match{Service: own, Path: web.Path}, Public: true, Build: func(t *Term) http.Handler {
		return t.Health.Gate(web.Handler(web.Config{Auth: t.Settings.Guard.Auth != "", Region: t.Settings.Region}))
	}})
	r.Handle(Route{Name: "queue", Match: Match{Service: own, Path: api.QueuePath}, Build: func(t *Term) http.Handler {
		return t.Health.Gate(api.QueueHandler(t.Daemon))
	}})
	r.Handle(Route{Name: "whoami", Match: Match{Service: own, Path: web.WhoAmIPath}, Build: func(t *Term) http.Handler {
		return web.WhoAmIHandler()
	}})
	r.Handle(Route{Name: "events", Match: Match{Service: own, Path: web.EventsPath}, Build: func(t *Term) http.Handler {
		var read web.EventsFunc
		if f, ok := t.Events.(*event.File); ok {
			read = f.Events
		}
		d := t.Daemon
		return t.Health.Gate(auth.Require(api.ActionGetEvents, web.EventsHandler(read, jobName(d), eventVisible(d), nil), api.WriteError))
	}})
}

// eventVisible shows an event to a caller that may describe its job
// (batch:DescribeServiceJob on the job's quota share, or queue, and on the
// job itself), as DescribeServiceJob decides; without authentication, to
// everyone.
func eventVisible(d *daemon.Daemon) web.VisibleFunc {
	return func(ctx context.Context, e event.Event) bool {
		if auth.PrincipalFrom(ctx) == nil {
			return true
		}
		share := d.QueueARN(e.Queue)
		if e.Share != "" {
			share = d.ShareARN(e.Queue, e.Share)
		}
		return auth.May(ctx, api.ActionDescribeServiceJob, share, d.JobARN(e.Job))
	}
}

// jobName names a job by its id, for the timeline, to a caller that may
// describe it (as DescribeServiceJob decides); "" for one the server no
// longer keeps or the caller may not describe.
func jobName(d *daemon.Daemon) web.NameFunc {
	return func(ctx context.Context, id string) string {
		j, err := d.Job(id)
		if err != nil || !auth.May(ctx, api.ActionDescribeServiceJob, d.JobShareARN(j), j.ARN) {
			return ""
		}
		return j.Name
	}
}
