package server

import (
	"context"
	"log/slog"
	"net/http"

	"qshare/api"
	"qshare/auth"
	"qshare/aws/sagemaker"
	"qshare/daemon"
	"qshare/executor"
	"qshare/logstream"
	"qshare/metrics"
)

// Term is what a route's handler is built from (Route.Build) in a term in
// which this server leads the store. Its daemon is not started yet when
// Build runs: what needs the store waits behind Health.Gate.
type Term struct {
	// Daemon leads the store in this term.
	Daemon *daemon.Daemon
	// Executor runs the term's attempts.
	Executor executor.Executor
	// Events is the event log (--events), nil without one.
	Events daemon.EventSink
	// Metrics is the term's collector, nil with --metrics off.
	Metrics *metrics.Metrics
	// Health is the readiness gate: not ready until the store is loaded
	// and the attempts in flight are recovered.
	Health *metrics.Health
	// Settings are the server's.
	Settings Settings
	// Log is the server's logger.
	Log *slog.Logger
}

// routes registers every service of the one endpoint. To add a service,
// add a Handle here (and its package beside api/, such as aws/sts), for
// example:
//
//	r.Handle(Route{Name: "sts", Match: Match{Service: "sts"},
//		BodyTypes: []string{"application/x-www-form-urlencoded"},
//		Build: func(t *Term) http.Handler { return sts.New(t.Settings.AccountID) }})
//
// qshare's own routes name the signing service "batch", which the qshare
// CLI and the dashboard sign with, so that a request signed for another
// service (an S3 bucket named "metrics") never reaches them.
func (sv *server) routes(ctx context.Context, r *Router) {
	const own = auth.Service
	h := sv.health
	r.Handle(Route{Name: "healthz", Match: Match{Service: own, Path: metrics.HealthzPath}, Public: true, Handler: h.Healthz()})
	r.Handle(Route{Name: "readyz", Match: Match{Service: own, Path: metrics.ReadyzPath}, Public: true, Handler: sv.readyz(h.Readyz())})
	// The AWS Batch API (POST /v1/<operation>, the tag routes): every
	// request signed for batch that no extension below takes, and every
	// unsigned one that no path below takes.
	r.Handle(Route{Name: "batch", Match: Match{Service: own}, Build: func(t *Term) http.Handler {
		a := api.New(t.Daemon, t.Log)
		if t.Metrics != nil {
			a.Observe(t.Metrics.API())
		}
		return t.Health.Gate(a)
	}})
	r.Handle(Route{Name: "logs", Match: Match{Service: own, Path: logstream.PathPrefix}, Build: func(t *Term) http.Handler {
		d := t.Daemon
		logs := &logstream.Handler{Job: d.Job, Logs: t.Executor.Logs, Resources: func(ref string) []string { return api.JobResources(d, ref) }}
		if il, ok := t.Executor.(executor.InstanceLogger); ok {
			logs.InstanceLogs = il.InstanceLogs
		}
		return t.Health.Gate(logs)
	}})
	r.Handle(Route{Name: "lending", Match: Match{Service: own, Path: api.LendingPath}, Build: func(t *Term) http.Handler {
		return t.Health.Gate(api.LendingHandler(t.Daemon))
	}})
	r.Handle(Route{Name: "plans", Match: Match{Service: own, Path: api.PlansPath + "/"}, Build: func(t *Term) http.Handler {
		return t.Health.Gate(api.PlansHandler(t.Daemon))
	}})
	routeDashboard(r, own) // web.go
	sv.routeSDK(r)         // aws.go: SageMaker, CloudWatch Logs, STS, IAM
	sv.routeS3(ctx, r)     // s3.go: the embedded S3 store
	if sv.s.Metrics == "on" {
		r.Handle(Route{Name: "metrics", Match: Match{Service: own, Path: metrics.Path}, Build: func(t *Term) http.Handler {
			t.Metrics.Watch(t.Daemon)
			t.Metrics.TrainingMetrics(func(ctx context.Context, e daemon.AttemptEnd) []metrics.MetricValue {
				var out []metrics.MetricValue
				for _, v := range sagemaker.FinalMetrics(ctx, t.Executor.Logs, e.Attempt, e.Payload) {
					out = append(out, metrics.MetricValue{Name: v.Name, Value: v.Value})
				}
				return out
			})
			return auth.Require(api.ActionGetMetrics, t.Metrics.Handler(), api.WriteError)
		}})
	}
}
