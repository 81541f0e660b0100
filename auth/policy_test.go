package auth

import "testing"

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, s string
		fold, want bool
	}{
		{"*", "", false, true},
		{"*", "anything", false, true},
		{"batch:*", "batch:SubmitServiceJob", true, true},
		{"batch:Describe*", "batch:DescribeServiceJob", true, true},
		{"batch:describe*", "batch:DescribeServiceJob", true, true}, // actions ignore case
		{"batch:describe*", "batch:DescribeServiceJob", false, false},
		{"batch:Describe*", "batch:ListServiceJobs", true, false},
		{"batch:?escribeServiceJob", "batch:DescribeServiceJob", true, true},
		{"batch:?escribeServiceJob", "batch:escribeServiceJob", true, false},
		{"arn:aws:batch:*:*:job-queue/training/quota-share/QS1", "arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS1", false, true},
		{"arn:aws:batch:*:*:job-queue/training/quota-share/QS1", "arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS10", false, false},
		{"arn:aws:batch:*:*:job-queue/training/quota-share/qs1", "arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS1", false, false}, // resources keep case
		{"a*b*c", "aXXbYYc", false, true},
		{"a*b*c", "aXXbYY", false, false},
		{"**", "x", false, true},
		{"a?", "a", false, false},
		{"", "", false, true},
		{"", "x", false, false},
		{"*a", "bbbbbbbbbbbbbbbbbbbbbbbbbbba", false, true},
	} {
		if got := Match(c.pattern, c.s, c.fold); got != c.want {
			t.Errorf("Match(%q, %q, %v) = %v, want %v", c.pattern, c.s, c.fold, got, c.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	share1 := "arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS1"
	share2 := "arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS2"
	job := "arn:aws:batch:us-east-1:000000000000:service-job/j1"
	teamA := &Policy{Name: "team-a", Statement: []Statement{
		{Effect: Allow, Action: []string{"batch:SubmitServiceJob", "batch:UpdateServiceJob"}, Resource: []string{"arn:aws:batch:*:*:job-queue/training/quota-share/QS1"}},
		{Effect: Allow, Action: []string{"batch:List*"}, Resource: []string{"*"}},
	}}
	noSubmitQS1 := &Policy{Name: "deny", Statement: []Statement{
		{Effect: Deny, Action: []string{"batch:submitservicejob"}, Resource: []string{share1}},
	}}
	admin := &Policy{Name: "admin", Statement: []Statement{{Effect: Allow, Action: []string{"batch:*"}, Resource: []string{"*"}}}}
	for _, c := range []struct {
		name      string
		policies  []*Policy
		action    string
		resources []string
		want      Decision
	}{
		{"no policy denies", nil, "batch:SubmitServiceJob", []string{share1}, ImplicitDeny},
		{"allowed on its share", []*Policy{teamA}, "batch:SubmitServiceJob", []string{share1}, Allowed},
		{"not on another share", []*Policy{teamA}, "batch:SubmitServiceJob", []string{share2}, ImplicitDeny},
		{"not another action", []*Policy{teamA}, "batch:TerminateServiceJob", []string{share1}, ImplicitDeny},
		{"a job of its share", []*Policy{teamA}, "batch:UpdateServiceJob", []string{share1, job}, Allowed},
		{"a job of another share", []*Policy{teamA}, "batch:UpdateServiceJob", []string{share2, job}, ImplicitDeny},
		{"List on *", []*Policy{teamA}, "batch:ListServiceJobs", []string{"*"}, Allowed},
		{"a share pattern does not cover *", []*Policy{teamA}, "batch:SubmitServiceJob", []string{"*"}, ImplicitDeny},
		{"admin", []*Policy{admin}, "batch:DeleteJobQueue", []string{"arn:aws:batch:us-east-1:000000000000:job-queue/training"}, Allowed},
		{"deny wins, either order", []*Policy{admin, noSubmitQS1}, "batch:SubmitServiceJob", []string{share1}, ExplicitDeny},
		{"deny wins, deny first", []*Policy{noSubmitQS1, admin}, "batch:SubmitServiceJob", []string{share1}, ExplicitDeny},
		{"deny on one resource of a job", []*Policy{admin, noSubmitQS1}, "batch:SubmitServiceJob", []string{job, share1}, ExplicitDeny},
		{"deny elsewhere does not matter", []*Policy{admin, noSubmitQS1}, "batch:SubmitServiceJob", []string{share2}, Allowed},
	} {
		if got := Evaluate(c.policies, c.action, c.resources); got != c.want {
			t.Errorf("%s: Evaluate(%s, %v) = %v, want %v", c.name, c.action, c.resources, got, c.want)
		}
	}
}
