package auth

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Condition keys: a statement's Condition block, as IAM's, names request
// values that the statement's Action and Resource do not. qshare knows the
// one key that AWS Batch defines for its fair-share queues,
// batch:ShareIdentifier (the share identifier a SubmitServiceJob names),
// and the four string operators; any other key or operator is refused when
// the file is read, never ignored.

// KeyShareIdentifier is the condition key of a submit's shareIdentifier.
const KeyShareIdentifier = "batch:ShareIdentifier"

// conditionKeys are the keys qshare knows, by their lowercased names (IAM
// reads key names without regard to case).
var conditionKeys = map[string]string{strings.ToLower(KeyShareIdentifier): KeyShareIdentifier}

// condition is one test of a statement's Condition: operator, key (its
// canonical name) and the values, any of which may match.
type condition struct {
	op     string
	key    string
	values []string
}

// holds reports whether the condition holds for the request's keys. As in
// IAM, a key the request does not carry matches no value: StringEquals and
// StringLike fail, StringNotEquals and StringNotLike hold.
func (c condition) holds(keys map[string]string) bool {
	v, ok := keys[c.key]
	like := c.op == "StringLike" || c.op == "StringNotLike"
	match := false
	if ok {
		for _, want := range c.values {
			if (like && Match(want, v, false)) || (!like && want == v) {
				match = true
				break
			}
		}
	}
	if strings.HasPrefix(c.op, "StringNot") {
		return !match
	}
	return match
}

// parseCondition reads a statement's Condition block: {OPERATOR: {KEY:
// VALUE or [VALUES]}}.
func parseCondition(n *yaml.Node, where string) ([]condition, error) {
	if n.Kind == 0 {
		return nil, nil
	}
	var raw map[string]map[string]stringOrSeq
	if err := n.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: Condition: write {OPERATOR: {KEY: VALUE or [VALUES]}}, such as {StringEquals: {%s: [teamA]}}: %v", where, KeyShareIdentifier, err)
	}
	var out []condition
	for op, keys := range raw {
		switch op {
		case "StringEquals", "StringNotEquals", "StringLike", "StringNotLike":
		default:
			return nil, fmt.Errorf("%s: Condition operator %q is not supported by qshare: use StringEquals, StringNotEquals, StringLike or StringNotLike", where, op)
		}
		for k, vs := range keys {
			key, ok := conditionKeys[strings.ToLower(k)]
			if !ok {
				return nil, fmt.Errorf("%s: Condition key %q is not known to qshare: the one key is %s", where, k, KeyShareIdentifier)
			}
			if len(vs.v) == 0 {
				return nil, fmt.Errorf("%s: Condition %s %s has no value", where, op, k)
			}
			out = append(out, condition{op: op, key: key, values: vs.v})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].op+out[i].key < out[j].op+out[j].key })
	return out, nil
}

type conditionKeysKey struct{}

// WithConditionKeys returns ctx carrying the request's condition keys
// (such as KeyShareIdentifier), which Authorize gives to the statements'
// Conditions. A key with an empty value is left out: the request does not
// carry it.
func WithConditionKeys(ctx context.Context, keys map[string]string) context.Context {
	m := map[string]string{}
	for k, v := range keys {
		if v != "" {
			m[k] = v
		}
	}
	return context.WithValue(ctx, conditionKeysKey{}, m)
}

// keysFrom returns the condition keys of ctx (nil: none).
func keysFrom(ctx context.Context) map[string]string {
	m, _ := ctx.Value(conditionKeysKey{}).(map[string]string)
	return m
}
