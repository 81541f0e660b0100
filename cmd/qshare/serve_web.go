package main

import (
	"net/http"

	"qshare/api"
	"qshare/daemon"
	"qshare/event"
	"qshare/metrics"
	"qshare/web"
)

// mountDashboard mounts the dashboard (package web) at /ui/ and the two
// read-only extensions it needs beside the lending one: the front of a
// queue with each job's reason (api.QueuePath) and the event log's last
// hour (web.EventsPath). Like the API they wait behind the readiness gate;
// the request guard wraps the whole mux. The timeline reads an --events
// FILE; with no event log, or one kept in the store, it says there is none.
func mountDashboard(mux *http.ServeMux, health *metrics.Health, d *daemon.Daemon, events daemon.EventSink) {
	var read web.EventsFunc
	if f, ok := events.(*event.File); ok {
		read = f.Events
	}
	mux.Handle(web.Path, health.Gate(web.Handler()))
	mux.Handle(api.QueuePath, health.Gate(api.QueueHandler(d)))
	mux.Handle(web.EventsPath, health.Gate(web.EventsHandler(read, jobName(d), nil)))
}

// jobName names a job by its id, for the timeline; "" for one the server
// no longer keeps.
func jobName(d *daemon.Daemon) web.NameFunc {
	return func(id string) string {
		j, err := d.Job(id)
		if err != nil {
			return ""
		}
		return j.Name
	}
}
