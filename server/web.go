package server

import (
	"context"
	"net/http"

	"qshare/api"
	"qshare/auth"
	"qshare/daemon"
	"qshare/event"
	"qshare/metrics"
	"qshare/web"
)

// mountDashboard mounts the dashboard (package web) at /ui/ and the
// read-only extensions it needs beside the lending one: the front of a
// queue with each job's reason (api.QueuePath), the event log's last hour
// (web.EventsPath) and the caller's principal (web.WhoAmIPath). Like the API they wait behind the readiness gate;
// the request guard wraps the whole mux (with --auth, the page's files are
// served unsigned and the page signs its requests for data). The timeline
// reads an --events FILE; with no event log, or one kept in the store, it
// says there is none. With --auth it needs batch:GetEvents, and shows each
// principal the events of the jobs it may describe.
func mountDashboard(mux *http.ServeMux, health *metrics.Health, d *daemon.Daemon, events daemon.EventSink, cfg web.Config) {
	var read web.EventsFunc
	if f, ok := events.(*event.File); ok {
		read = f.Events
	}
	mux.Handle(web.Path, health.Gate(web.Handler(cfg)))
	mux.Handle(api.QueuePath, health.Gate(api.QueueHandler(d)))
	mux.Handle(web.WhoAmIPath, web.WhoAmIHandler())
	mux.Handle(web.EventsPath, health.Gate(auth.Require(api.ActionGetEvents, web.EventsHandler(read, jobName(d), eventVisible(d), nil), api.WriteError)))
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
