package api

import (
	"net/http"
	"strings"

	"qshare"
	"qshare/auth"
	"qshare/daemon"
)

// PlansPath is where the server mounts PlansHandler: the capacity plans, a
// qshare extension (issue 21) beside LendingPath. The AWS Batch operations
// do not know plans; a job names one in its payload's
// ResourceConfig.TrainingPlanArn.
//
//	GET    /qshare/v1/capacity-plans        every plan, in name order
//	GET    /qshare/v1/capacity-plans/NAME   one plan
//	PUT    /qshare/v1/capacity-plans/NAME   create it, or replace it whole
//	DELETE /qshare/v1/capacity-plans/NAME   delete it
const PlansPath = qshare.PlansPath

// The actions of the capacity-plan endpoint, on the plan's ARN
// (arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME), or "*" for the
// list.
const (
	// ActionPutCapacityPlan creates or replaces a plan.
	ActionPutCapacityPlan = actionPrefix + "PutCapacityPlan"
	// ActionDeleteCapacityPlan deletes a plan.
	ActionDeleteCapacityPlan = actionPrefix + "DeleteCapacityPlan"
	// ActionDescribeCapacityPlans reads one plan, or every plan on "*".
	ActionDescribeCapacityPlans = actionPrefix + "DescribeCapacityPlans"
)

// PlansResponse is the body of GET PlansPath.
type PlansResponse struct {
	CapacityPlans []qshare.PlanBody `json:"capacityPlans"`
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// PlansHandler serves PlansPath. Errors use the AWS error format and the
// one error table: a bad name, body or member, an unknown plan, queue or
// share, another method, or a query string is a ClientException (400) that
// says which, and changes nothing.
func PlansHandler(d *daemon.Daemon) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := strings.CutPrefix(r.URL.Path, PlansPath)
		if !ok || (name != "" && !strings.HasPrefix(name, "/")) {
			writeError(w, qshare.Errorf(qshare.ENOTFOUND, "no such extension endpoint: use %s or %s/NAME", PlansPath, PlansPath))
			return
		}
		name = strings.TrimPrefix(name, "/")
		if r.URL.RawQuery != "" {
			writeError(w, qshare.Errorf(qshare.EINVALID, "%s takes no query parameters", PlansPath))
			return
		}
		if name == "" {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				writeError(w, qshare.Errorf(qshare.EINVALID, "%s is not allowed on %s: use GET, or PUT and DELETE on %s/NAME", r.Method, PlansPath, PlansPath))
				return
			}
			if err := auth.Authorize(r.Context(), ActionDescribeCapacityPlans, "*"); err != nil {
				writeError(w, err)
				return
			}
			out := PlansResponse{CapacityPlans: []qshare.PlanBody{}}
			for _, p := range d.Plans() {
				out.CapacityPlans = append(out.CapacityPlans, qshare.PlanBodyOf(p))
			}
			writeJSON(w, http.StatusOK, out)
			return
		}
		if err := qshare.ValidateName("capacityPlanName", name); err != nil {
			writeError(w, err)
			return
		}
		arn := qshare.PlanARN(d.Region(), d.AccountID(), name)
		action := map[string]string{http.MethodGet: ActionDescribeCapacityPlans, http.MethodHead: ActionDescribeCapacityPlans,
			http.MethodPut: ActionPutCapacityPlan, http.MethodDelete: ActionDeleteCapacityPlan}[r.Method]
		if action == "" {
			w.Header().Set("Allow", "GET, HEAD, PUT, DELETE")
			writeError(w, qshare.Errorf(qshare.EINVALID, "%s is not allowed on %s/NAME: use GET, PUT or DELETE", r.Method, PlansPath))
			return
		}
		if err := auth.Authorize(r.Context(), action, arn); err != nil {
			writeError(w, err)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			p, err := d.Plan(name)
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, qshare.PlanBodyOf(p))
		case http.MethodDelete:
			// A plan gives its share capacity: taking it away is an
			// update of that share, checked inside the deletion, against
			// the plan it deletes.
			if err := d.DeletePlanChecked(r.Context(), name, func(old qshare.CapacityPlan) error {
				return authorizeShareUpdate(r.Context(), shareARN(d, old.JobQueue, old.QuotaShare))
			}); err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, struct{}{})
		case http.MethodPut:
			body, err := readBody(w, r, maxBody)
			if err != nil {
				writeError(w, err)
				return
			}
			var in qshare.PlanBody
			if err := decode(body, &in); err != nil {
				writeError(w, err)
				return
			}
			if in.CapacityPlanName != "" && in.CapacityPlanName != name {
				writeError(w, qshare.Errorf(qshare.EINVALID, "capacityPlanName %q is not the name in the path, %q: leave it out, or give the same", truncate(in.CapacityPlanName, 128), name))
				return
			}
			pl, err := in.Plan()
			if err != nil {
				writeError(w, err)
				return
			}
			// A plan gives its share capacity, so it is an update of that
			// share, and, where it replaces a plan of another share, of
			// that one too: checked inside the change, against the plan it
			// replaces, so that a plan moved to another share meanwhile is
			// not replaced unchecked.
			if err := authorizeShareUpdate(r.Context(), shareARN(d, pl.JobQueue, pl.QuotaShare)); err != nil {
				writeError(w, err)
				return
			}
			p, err := d.PutPlan(r.Context(), daemon.PlanInput{Name: name, JobQueue: pl.JobQueue, QuotaShare: pl.QuotaShare,
				InstanceType: pl.InstanceType, InstanceCount: pl.InstanceCount, StartTime: pl.StartTime, EndTime: pl.EndTime, WarningSeconds: pl.WarningSeconds,
				CheckOld: func(old qshare.CapacityPlan) error {
					return authorizeShareUpdate(r.Context(), shareARN(d, old.JobQueue, old.QuotaShare))
				}})
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, qshare.PlanBodyOf(p))
		}
	})
}
