package auth

import (
	"fmt"
	"strings"
)

// Effect is a policy statement's effect.
type Effect string

// The two effects of IAM.
const (
	Allow Effect = "Allow"
	Deny  Effect = "Deny"
)

// Statement is one statement of a policy, already checked: its Action and
// Resource patterns are non-empty, and it has no NotAction, NotResource or
// Principal (which qshare refuses rather than ignore), and a Condition only
// on the keys qshare knows (condition.go).
type Statement struct {
	Sid      string
	Effect   Effect
	Action   []string // patterns with * and ?, matched without regard to case
	Resource []string // patterns with * and ?, matched with regard to case
	// cond must all hold for the statement to apply (condition.go).
	cond []condition
}

// Policy is an IAM-style identity policy: a named list of statements.
type Policy struct {
	Name      string
	Statement []Statement
}

// Decision is what the policies of a principal say about a request.
type Decision int

// The three outcomes of IAM's evaluation.
const (
	// ImplicitDeny: no statement allows the request (IAM's default).
	ImplicitDeny Decision = iota
	// Allowed: a statement allows it and none denies it.
	Allowed
	// ExplicitDeny: a Deny statement matches it; no Allow can change that.
	ExplicitDeny
)

// Evaluate decides a request for action on resources with policies, as IAM
// does: an explicit Deny that matches the action and any of the resources
// wins; otherwise an Allow that matches the action and any of the resources
// allows; otherwise the request is denied by default. A request names more
// than one resource when it concerns a job: the job's own ARN and its quota
// share's ARN (see docs/security.md), so that a statement on either allows it
// and a Deny on either refuses it.
func Evaluate(policies []*Policy, action string, resources []string) Decision {
	return EvaluateKeys(policies, action, resources, nil)
}

// EvaluateKeys is Evaluate for a request that carries condition keys (see
// WithConditionKeys): a statement with a Condition applies only when each
// of its tests holds for keys.
func EvaluateKeys(policies []*Policy, action string, resources []string, keys map[string]string) Decision {
	d := ImplicitDeny
	for _, p := range policies {
		for i := range p.Statement {
			s := &p.Statement[i]
			if !s.matches(action, resources) || !s.conditionsHold(keys) {
				continue
			}
			if s.Effect == Deny {
				return ExplicitDeny
			}
			d = Allowed
		}
	}
	return d
}

func (s *Statement) matches(action string, resources []string) bool {
	actionOK := false
	for _, a := range s.Action {
		if Match(a, action, true) {
			actionOK = true
			break
		}
	}
	if !actionOK {
		return false
	}
	for _, pat := range s.Resource {
		for _, r := range resources {
			if Match(pat, r, false) {
				return true
			}
		}
	}
	return false
}

// Match reports whether s matches pattern, in which * stands for any run of
// characters (none included) and ? for exactly one, as in IAM's Action and
// Resource; foldCase makes the match ignore ASCII case, as IAM does for
// actions. It takes time proportional to len(pattern)*len(s) at worst.
func Match(pattern, s string, foldCase bool) bool {
	if foldCase {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	p, i := 0, 0
	star, mark := -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]) && pattern[p] != '*':
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p = star + 1
			mark++
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// deniedMessage is AccessDeniedException's message, in AWS's words.
func deniedMessage(principalARN, action, resource string, d Decision) string {
	why := "because no identity-based policy allows the " + action + " action"
	if d == ExplicitDeny {
		why = "with an explicit deny in an identity-based policy"
	}
	return fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s %s", principalARN, action, resource, why)
}

// conditionsHold reports whether every test of the statement's Condition
// holds for the request's keys (true without a Condition).
func (s *Statement) conditionsHold(keys map[string]string) bool {
	for _, c := range s.cond {
		if !c.holds(keys) {
			return false
		}
	}
	return true
}
