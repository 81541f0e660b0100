package qshare

import (
	"strings"
	"time"
)

// CapacityPlan is a qshare extension modelled on SageMaker training plans:
// InstanceCount instances of InstanceType that a quota share has, on top of
// its own capacity, for the window [StartTime, EndTime). The capacity is
// added to the share's job queue's service environment and to the share's
// own capacity while the window is open; a job whose payload names the plan
// (ResourceConfig.TrainingPlanArn) runs only on it. Plans are declared in
// the apply file (capacityPlans:) and through the extension endpoint
// /qshare/v1/capacity-plans; the AWS Batch operations do not know them.
type CapacityPlan struct {
	Name string `json:"name"`
	// ARN is arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME.
	ARN string `json:"arn"`
	// JobQueue and QuotaShare name the share the capacity goes to.
	JobQueue   string `json:"jobQueue"`
	QuotaShare string `json:"quotaShare"`
	// InstanceType and InstanceCount are the capacity.
	InstanceType  string `json:"instanceType"`
	InstanceCount int64  `json:"instanceCount"`
	// StartTime and EndTime are the window [StartTime, EndTime).
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
	// WarningSeconds is how long before EndTime the plan stops taking new
	// starts and what runs on its capacity is stopped gracefully, to have
	// stopped by EndTime; nil means DefaultPlanWarningSeconds.
	WarningSeconds *int64    `json:"warningSeconds,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}

// DefaultPlanWarningSeconds is a capacity plan's warning when it gives none:
// 10 minutes.
const DefaultPlanWarningSeconds = 600

// MaxPlanWindow is the longest window a capacity plan may have: 366 days.
const MaxPlanWindow = 366 * 24 * time.Hour

// Warning returns the plan's warning with the default applied.
func (p *CapacityPlan) Warning() time.Duration {
	if p.WarningSeconds == nil {
		return DefaultPlanWarningSeconds * time.Second
	}
	return time.Duration(*p.WarningSeconds) * time.Second
}

// PlanARN returns the ARN of the training plan name in region and account.
func PlanARN(region, account, name string) string {
	return "arn:aws:sagemaker:" + region + ":" + account + ":training-plan/" + name
}

// ParsePlanARN returns the plan name of a training-plan ARN,
// arn:aws:sagemaker:REGION:ACCOUNT:training-plan/NAME, and whether the ARN
// has that form.
func ParsePlanARN(arn string) (region, account, name string, ok bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sagemaker" || parts[3] == "" || parts[4] == "" {
		return "", "", "", false
	}
	name, ok = strings.CutPrefix(parts[5], "training-plan/")
	if !ok || ValidateName("name", name) != nil {
		return "", "", "", false
	}
	return parts[3], parts[4], name, true
}

// ValidateCapacityPlan checks a plan as a client gives it (ARN and
// CreatedAt are the server's): its name, its share, one instance type, a
// count of at least 1, a window that ends after it starts and lasts at
// most MaxPlanWindow, and a warning of 0 or more seconds, shorter than the
// window. field prefixes the field names in the errors ("" at the API,
// "capacityPlans[0]" in a file).
func ValidateCapacityPlan(field string, p *CapacityPlan) error {
	f := func(n string) string {
		if field == "" {
			return n
		}
		return field + "." + n
	}
	if err := ValidateName(f("name"), p.Name); err != nil {
		return err
	}
	if err := ValidateName(f("jobQueue"), p.JobQueue); err != nil {
		return err
	}
	if err := ValidateName(f("quotaShareName"), p.QuotaShare); err != nil {
		return err
	}
	if p.InstanceType == "" || len(p.InstanceType) > 128 || strings.ContainsFunc(p.InstanceType, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return Errorf(EINVALID, "%s %q is not valid: name an instance type such as ml.p5.48xlarge", f("instanceType"), p.InstanceType)
	}
	if p.InstanceCount < 1 || p.InstanceCount > 1_000_000 {
		return Errorf(EINVALID, "%s %d is not valid: give 1 to 1000000 instances", f("instanceCount"), p.InstanceCount)
	}
	if p.StartTime.IsZero() {
		return Errorf(EINVALID, "%s is required: give the time the plan's capacity starts, e.g. 2026-12-01T00:00:00Z", f("startTime"))
	}
	if !p.EndTime.After(p.StartTime) {
		return Errorf(EINVALID, "%s %s is not valid: it must be after startTime %s", f("endTime"), p.EndTime.UTC().Format(time.RFC3339), p.StartTime.UTC().Format(time.RFC3339))
	}
	if p.EndTime.Sub(p.StartTime) > MaxPlanWindow {
		return Errorf(EINVALID, "%s is not valid: the window from startTime lasts %s, more than the %d days a plan may last", f("endTime"), p.EndTime.Sub(p.StartTime), int(MaxPlanWindow/(24*time.Hour)))
	}
	if p.WarningSeconds != nil && (*p.WarningSeconds < 0 || time.Duration(*p.WarningSeconds)*time.Second >= p.EndTime.Sub(p.StartTime)) {
		return Errorf(EINVALID, "%s %d is not valid: give 0 or more seconds, fewer than the window's %d", f("warningSeconds"), *p.WarningSeconds, int64(p.EndTime.Sub(p.StartTime)/time.Second))
	}
	return nil
}

// PlansPath is where a qshare server serves its capacity plans (a qshare
// extension): GET PlansPath lists them ({"capacityPlans": [PlanBody...]});
// GET, PUT (a PlanBody) and DELETE PlansPath/NAME read, create or replace,
// and delete one.
const PlansPath = "/qshare/v1/capacity-plans"

// PlanBody is a capacity plan on the wire of PlansPath: the body of a PUT
// (without capacityPlanArn and createdAt, which the server sets) and of
// the answers. Times are RFC 3339.
type PlanBody struct {
	CapacityPlanName string `json:"capacityPlanName,omitempty"`
	CapacityPlanArn  string `json:"capacityPlanArn,omitempty"`
	JobQueue         string `json:"jobQueue"`
	QuotaShareName   string `json:"quotaShareName"`
	InstanceType     string `json:"instanceType"`
	InstanceCount    int64  `json:"instanceCount"`
	StartTime        string `json:"startTime"`
	EndTime          string `json:"endTime"`
	// WarningSeconds is how long before endTime what runs on the plan is
	// stopped, to have stopped by then; absent means 600.
	WarningSeconds *int64 `json:"warningSeconds,omitempty"`
	CreatedAt      string `json:"createdAt,omitempty"`
}

// PlanBodyOf is p on the wire.
func PlanBodyOf(p CapacityPlan) PlanBody {
	b := PlanBody{CapacityPlanName: p.Name, CapacityPlanArn: p.ARN, JobQueue: p.JobQueue, QuotaShareName: p.QuotaShare,
		InstanceType: p.InstanceType, InstanceCount: p.InstanceCount, StartTime: p.StartTime.UTC().Format(time.RFC3339Nano),
		EndTime: p.EndTime.UTC().Format(time.RFC3339Nano), WarningSeconds: p.WarningSeconds}
	if !p.CreatedAt.IsZero() {
		b.CreatedAt = p.CreatedAt.UTC().Format(time.RFC3339Nano)
	}
	return b
}

// Plan reads b back: its times must be RFC 3339 (an EINVALID error that
// names the member otherwise). The plan is not validated further (see
// ValidateCapacityPlan).
func (b PlanBody) Plan() (CapacityPlan, error) {
	p := CapacityPlan{Name: b.CapacityPlanName, ARN: b.CapacityPlanArn, JobQueue: b.JobQueue, QuotaShare: b.QuotaShareName,
		InstanceType: b.InstanceType, InstanceCount: b.InstanceCount, WarningSeconds: b.WarningSeconds}
	var err error
	if p.StartTime, err = planTime("startTime", b.StartTime); err != nil {
		return CapacityPlan{}, err
	}
	if p.EndTime, err = planTime("endTime", b.EndTime); err != nil {
		return CapacityPlan{}, err
	}
	if b.CreatedAt != "" {
		p.CreatedAt, _ = time.Parse(time.RFC3339Nano, b.CreatedAt)
	}
	return p, nil
}

// planTime reads a time member of a PlanBody.
func planTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, Errorf(EINVALID, "%s is required: give an RFC 3339 time such as 2026-12-01T00:00:00Z", field)
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil || len(v) > 64 {
		if len(v) > 64 {
			v = v[:64] + "…"
		}
		return time.Time{}, Errorf(EINVALID, "%s %q is not an RFC 3339 time: give one such as 2026-12-01T00:00:00Z", field, v)
	}
	return t, nil
}
