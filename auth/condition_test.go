package auth

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConditionShareIdentifier: statements on batch:ShareIdentifier apply
// as IAM's do, a key the request lacks included, and the file refuses
// operators and keys qshare does not know.
func TestConditionShareIdentifier(t *testing.T) {
	cond := func(src string) []condition {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(src), &n); err != nil {
			t.Fatal(err)
		}
		c, err := parseCondition(n.Content[0], "test")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	queue := "arn:aws:batch:us-east-1:000000000000:job-queue/fair"
	allow := func(src string) []*Policy {
		return []*Policy{{Name: "p", Statement: []Statement{{Effect: Allow, Action: []string{"batch:SubmitServiceJob"}, Resource: []string{"*"}, cond: cond(src)}}}}
	}
	adminButNotB := []*Policy{{Name: "p", Statement: []Statement{
		{Effect: Allow, Action: []string{"batch:*"}, Resource: []string{"*"}},
		{Effect: Deny, Action: []string{"batch:SubmitServiceJob"}, Resource: []string{"*"}, cond: cond(`{StringLike: {batch:shareidentifier: "team-b*"}}`)},
	}}}
	for _, c := range []struct {
		name     string
		policies []*Policy
		share    string
		want     Decision
	}{
		{"equals, its share", allow(`{StringEquals: {batch:ShareIdentifier: [teamA, teamC]}}`), "teamA", Allowed},
		{"equals, another share", allow(`{StringEquals: {batch:ShareIdentifier: [teamA, teamC]}}`), "teamB", ImplicitDeny},
		{"equals, no share named", allow(`{StringEquals: {batch:ShareIdentifier: teamA}}`), "", ImplicitDeny},
		{"like", allow(`{StringLike: {batch:ShareIdentifier: "team?"}}`), "teamZ", Allowed},
		{"not equals, no share named", allow(`{StringNotEquals: {batch:ShareIdentifier: teamB}}`), "", Allowed},
		{"not equals, the share", allow(`{StringNotEquals: {batch:ShareIdentifier: teamB}}`), "teamB", ImplicitDeny},
		{"deny on a share", adminButNotB, "team-b-1", ExplicitDeny},
		{"deny not on another", adminButNotB, "team-a", Allowed},
	} {
		keys := map[string]string{}
		if c.share != "" {
			keys[KeyShareIdentifier] = c.share
		}
		if got := EvaluateKeys(c.policies, "batch:SubmitServiceJob", []string{queue}, keys); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	for _, bad := range []string{`{Bool: {batch:ShareIdentifier: x}}`, `{StringEquals: {aws:SourceIp: x}}`, `{StringEquals: {batch:ShareIdentifier: []}}`, `[x]`} {
		var n yaml.Node
		yaml.Unmarshal([]byte(bad), &n)
		if _, err := parseCondition(n.Content[0], "test"); err == nil || !strings.Contains(err.Error(), "Condition") {
			t.Errorf("Condition %s: %v, want a refusal", bad, err)
		}
	}
}
