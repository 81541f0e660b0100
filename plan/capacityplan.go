package plan

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"qshare"
	"qshare/config"
)

// PlanAPI reads and changes a server's capacity plans (a qshare extension
// outside the AWS Batch API, qshare.PlansPath). *PlanClient implements it.
type PlanAPI interface {
	// Plans returns every plan of the server.
	Plans(ctx context.Context) ([]qshare.CapacityPlan, error)
	// PutPlan creates or replaces a plan.
	PutPlan(ctx context.Context, p qshare.CapacityPlan) error
	// DeletePlan deletes a plan.
	DeletePlan(ctx context.Context, name string) error
}

var _ PlanAPI = (*PlanClient)(nil)

// PlanClient speaks a qshare server's capacity-plan endpoint.
type PlanClient struct {
	// Endpoint is the server's base URL, such as http://127.0.0.1:8750.
	Endpoint string
	// HTTP is the client to use (signed, for a server with --auth); nil
	// means http.DefaultClient.
	HTTP *http.Client
}

// do sends method to PlansPath/name (the list for "") with body v (none
// when nil) and decodes a 200 answer into out (when not nil). A refusal is
// a *qshare.Error with the server's message.
func (c *PlanClient) do(ctx context.Context, method, name string, v, out any) error {
	u := c.Endpoint + qshare.PlansPath
	if name != "" {
		u += "/" + url.PathEscape(name)
	}
	var body io.Reader
	if v != nil {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cmp.Or(c.HTTP, http.DefaultClient).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading %s: %w", qshare.PlansPath, err)
	}
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	switch {
	case resp.StatusCode == http.StatusOK:
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("the server's answer to %s %s is not valid: %w", method, qshare.PlansPath, err)
		}
		return nil
	case resp.StatusCode == http.StatusForbidden && json.Unmarshal(b, &e) == nil && e.Message != "":
		return qshare.Errorf(qshare.EDENIED, "%s: %s", e.Type, e.Message)
	case json.Unmarshal(b, &e) == nil && e.Type == "ClientException" && e.Message != "" && resp.StatusCode != http.StatusNotFound:
		return qshare.Errorf(qshare.EINVALID, "%s", e.Message)
	case json.Unmarshal(b, &e) == nil && e.Message != "" && resp.StatusCode != http.StatusNotFound:
		return fmt.Errorf("the server failed: %s", e.Message)
	}
	return qshare.Errorf(qshare.EINVALID, "the server at %s does not serve %s (status %d): capacity plans need a qshare server of this version", c.Endpoint, qshare.PlansPath, resp.StatusCode)
}

// Plans implements PlanAPI.
func (c *PlanClient) Plans(ctx context.Context) ([]qshare.CapacityPlan, error) {
	var out struct {
		CapacityPlans []qshare.PlanBody `json:"capacityPlans"`
	}
	if err := c.do(ctx, http.MethodGet, "", nil, &out); err != nil {
		return nil, err
	}
	ps := make([]qshare.CapacityPlan, 0, len(out.CapacityPlans))
	for _, b := range out.CapacityPlans {
		p, err := b.Plan()
		if err != nil {
			return nil, fmt.Errorf("the server's capacity plan %q: %w", b.CapacityPlanName, err)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// PutPlan implements PlanAPI.
func (c *PlanClient) PutPlan(ctx context.Context, p qshare.CapacityPlan) error {
	b := qshare.PlanBodyOf(p)
	b.CapacityPlanArn, b.CreatedAt = "", ""
	return c.do(ctx, http.MethodPut, p.Name, b, nil)
}

// DeletePlan implements PlanAPI.
func (c *PlanClient) DeletePlan(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, name, nil, nil)
}

// planChanges lists what differs between the server's plan cur and the
// file's want, one field a line.
func planChanges(cur, want qshare.CapacityPlan) []string {
	var out []string
	add := func(field string, from, to any) { out = append(out, fmt.Sprintf("%s %v → %v", field, from, to)) }
	if cur.JobQueue != want.JobQueue || cur.QuotaShare != want.QuotaShare {
		add("quota share", cur.JobQueue+"/"+cur.QuotaShare, want.JobQueue+"/"+want.QuotaShare)
	}
	if cur.InstanceType != want.InstanceType {
		add("instanceType", cur.InstanceType, want.InstanceType)
	}
	if cur.InstanceCount != want.InstanceCount {
		add("instanceCount", cur.InstanceCount, want.InstanceCount)
	}
	if !cur.StartTime.Equal(want.StartTime) {
		add("startTime", cur.StartTime.UTC().Format(time.RFC3339), want.StartTime.UTC().Format(time.RFC3339))
	}
	if !cur.EndTime.Equal(want.EndTime) {
		add("endTime", cur.EndTime.UTC().Format(time.RFC3339), want.EndTime.UTC().Format(time.RFC3339))
	}
	if cur.Warning() != want.Warning() {
		add("warningSeconds", int64(cur.Warning()/time.Second), int64(want.Warning()/time.Second))
	}
	return out
}

// readPlans reads the server's plans, when the file declares some or a
// prune may delete some; a server without the endpoint has none to prune.
func (a *Applier) readPlans(ctx context.Context, f *config.File) error {
	a.plans = map[string]qshare.CapacityPlan{}
	if a.opts.Plans == nil {
		if len(f.CapacityPlans) > 0 {
			return qshare.Errorf(qshare.EINVALID, "the file declares capacityPlans, which need a qshare server's capacity-plan endpoint (%s)", qshare.PlansPath)
		}
		return nil
	}
	ps, err := a.opts.Plans.Plans(ctx)
	if err != nil {
		if len(f.CapacityPlans) == 0 && !a.opts.Prune {
			return nil // not needed
		}
		return err
	}
	for _, p := range ps {
		a.plans[p.Name] = p
	}
	return nil
}

// planPlans plans the file's capacity plans: created, configured (the
// server's replaced whole) or unchanged.
func (a *Applier) planPlans(f *config.File) []Action {
	var plan []Action
	for _, want := range f.CapacityPlans {
		cur, ok := a.plans[want.Name]
		act := Action{Kind: "capacityPlan", Name: want.Name, Action: "created"}
		if ok {
			act.Changes = planChanges(cur, want)
			act.Action = "configured"
			if len(act.Changes) == 0 {
				act.Action = "unchanged"
				plan = append(plan, act)
				continue
			}
		}
		p := want
		act.do = func(ctx context.Context) error { return a.opts.Plans.PutPlan(ctx, p) }
		plan = append(plan, act)
	}
	return plan
}

// prunePlans plans the deletion of the server's plans that the file does
// not name, in name order: first of the prune, since a share with plans
// cannot be deleted.
func (a *Applier) prunePlans(f *config.File) []Action {
	var plan []Action
	for _, n := range slices.Sorted(func(yield func(string) bool) {
		for n := range a.plans {
			if !yield(n) {
				return
			}
		}
	}) {
		if slices.ContainsFunc(f.CapacityPlans, func(p qshare.CapacityPlan) bool { return p.Name == n }) {
			continue
		}
		name := n
		plan = append(plan, Action{Kind: "capacityPlan", Name: name, Action: "deleted", do: func(ctx context.Context) error { return a.opts.Plans.DeletePlan(ctx, name) }})
	}
	return plan
}
