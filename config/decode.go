package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"qshare"
)

// Options tune Parse and Validate.
type Options struct {
	// MaxSharesPerQueue is the most quota shares one job queue may have;
	// 0 means qshare.DefaultQuotaSharesPerQueue (20, the AWS limit). A
	// server configured with a higher limit passes it here.
	MaxSharesPerQueue int
	// AllowExternalReferences lets a queue refer to a scheduling policy or
	// service environment the file does not declare (one that already
	// exists on the server). The simulator and the checker leave it off:
	// they know nothing but the file.
	AllowExternalReferences bool
}

func (o Options) maxShares() int {
	if o.MaxSharesPerQueue > 0 {
		return o.MaxSharesPerQueue
	}
	return qshare.DefaultQuotaSharesPerQueue
}

// Problem is one thing wrong with a configuration file.
type Problem struct {
	// Pos is where the offending field was set.
	Pos Pos
	// Path is the field path, e.g. jobQueues[0].quotaShares[1].strategy.
	Path string
	// Message says what is wrong and how to fix it; it names the path.
	Message string
}

// String renders the problem as "line 12: message".
func (p Problem) String() string {
	if s := p.Pos.String(); s != "" {
		return s + ": " + p.Message
	}
	return p.Message
}

// Errors is every problem of a file, in file order. It unwraps to a
// *qshare.Error with code EINVALID whose message lists them all, so that
// errors.As and qshare.ErrorCodeOf see an ordinary invalid-input error.
type Errors struct {
	// Name is the file's name, when known.
	Name     string
	Problems []Problem
}

// Error lists every problem, one a line.
func (e *Errors) Error() string {
	var b strings.Builder
	name := e.Name
	if name == "" {
		name = "configuration"
	}
	if len(e.Problems) == 1 {
		fmt.Fprintf(&b, "%s has 1 error:", name)
	} else {
		fmt.Fprintf(&b, "%s has %d errors:", name, len(e.Problems))
	}
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap returns the problems as one *qshare.Error with code EINVALID.
func (e *Errors) Unwrap() error { return &qshare.Error{Code: qshare.EINVALID, Message: e.Error()} }

// Parse reads a configuration file (YAML, or JSON, which is YAML too) and
// validates it. name is used in error messages only. On any problem it
// returns nil and an *Errors that lists all of them, each with its line and
// field path: unknown keys, values of the wrong type, and every rule that the
// API would enforce (see Validate).
func Parse(name string, data []byte, opts Options) (*File, error) {
	d := &decoder{pos: map[string]Pos{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &Errors{Name: name, Problems: []Problem{{Message: "not valid YAML or JSON: " + strings.TrimPrefix(err.Error(), "yaml: ")}}}
	}
	f := &File{}
	if len(doc.Content) == 0 {
		d.fail(nil, "", "the file is empty: declare serviceEnvironments, schedulingPolicies and jobQueues")
	} else {
		d.file(doc.Content[0], f)
	}
	f.pos = d.pos
	probs := d.problems
	if len(probs) == 0 {
		// Rules are checked only on a file whose shape is right, so that one
		// mistake is not reported twice.
		probs = f.check(opts)
	}
	if len(probs) > 0 {
		sortProblems(probs)
		return nil, &Errors{Name: name, Problems: probs}
	}
	return f, nil
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i].Pos, ps[j].Pos
		if (a.Line == 0) != (b.Line == 0) {
			return a.Line != 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

type decoder struct {
	pos      map[string]Pos
	problems []Problem
}

func (d *decoder) at(n *yaml.Node, path string) {
	if n != nil {
		d.pos[path] = Pos{Line: n.Line, Column: n.Column}
	}
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	p := Problem{Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		p.Pos = Pos{Line: n.Line, Column: n.Column}
	}
	d.problems = append(d.problems, p)
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return fmt.Sprintf("%q", n.Value)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// fields decodes a mapping node: each known key is handed to its function;
// unknown and repeated keys are problems.
func (d *decoder) fields(n *yaml.Node, path string, known map[string]func(v *yaml.Node, path string)) bool {
	n = resolve(n)
	d.at(n, path)
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "%s must be a mapping of keys to values, not %s", orRoot(path), kindName(n))
		return false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := join(path, k.Value)
		fn, ok := known[k.Value]
		switch {
		case !ok:
			d.fail(k, p, "%s: unknown key %q%s", orRoot(path), k.Value, suggest(k.Value, known))
		case seen[k.Value]:
			d.fail(k, p, "%s is given more than once: keep one", p)
		default:
			seen[k.Value] = true
			d.at(v, p)
			fn(resolve(v), p)
		}
	}
	return true
}

func orRoot(path string) string {
	if path == "" {
		return "the top level"
	}
	return path
}

func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// suggest returns ` (did you mean "x"?)` for the known key nearest to k, or
// the list of known keys when none is near.
func suggest(k string, known map[string]func(*yaml.Node, string)) string {
	keys := make([]string, 0, len(known))
	for key := range known {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	best, bestD := "", 1<<30
	for _, key := range keys {
		if dist := editDistance(strings.ToLower(k), strings.ToLower(key)); dist < bestD {
			best, bestD = key, dist
		}
	}
	if bestD <= 3 || strings.EqualFold(best, k) {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (known keys: " + strings.Join(keys, ", ") + ")"
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// list decodes a sequence node, calling fn for each item with its path.
func (d *decoder) list(n *yaml.Node, path string, fn func(item *yaml.Node, path string)) {
	if n.Kind != yaml.SequenceNode {
		if n.Tag == "!!null" {
			return
		}
		d.fail(n, path, "%s must be a list, not %s", path, kindName(n))
		return
	}
	for i, item := range n.Content {
		p := fmt.Sprintf("%s[%d]", path, i)
		item = resolve(item)
		d.at(item, p)
		fn(item, p)
	}
}

// executor reads an environment's `executor: NAME` (a qshare extension),
// which the server keeps as the tag qshare.TagExecutor. A tags entry that
// names another executor is a problem.
func (d *decoder) executor(n *yaml.Node, path string, e *Environment) {
	var name string
	d.str(n, path, &name)
	if name == "" {
		if n.Kind == yaml.ScalarNode {
			d.fail(n, path, "%s is empty: name one of the server's executors (qshare serve --executors), or leave it out for the one named default", path)
		}
		return
	}
	if t, ok := e.Tags[qshare.TagExecutor]; ok && t != name {
		d.fail(n, path, "%s is %q but the tags name executor %q (%s): give it once", path, name, t, qshare.TagExecutor)
		return
	}
	e.Executor = name
}

func (d *decoder) str(n *yaml.Node, path string, dst *string) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.fail(n, path, "%s must be a string, not %s", path, kindName(n))
		return
	}
	*dst = n.Value
}

func (d *decoder) int(n *yaml.Node, path string, dst *int64) bool {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		d.fail(n, path, "%s must be an integer, not %s", path, kindName(n))
		return false
	}
	if n.Tag == "!!float" {
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			d.fail(n, path, "%s must be an integer, not %s", path, n.Value)
			return false
		}
		*dst = int64(f)
		return true
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
	if err != nil {
		d.fail(n, path, "%s %s is not an integer that fits in 64 bits", path, n.Value)
		return false
	}
	*dst = v
	return true
}

func (d *decoder) intPtr(n *yaml.Node, path string, dst **int64) {
	var v int64
	if d.int(n, path, &v) {
		*dst = &v
	}
}

func (d *decoder) tags(n *yaml.Node, path string, dst *map[string]string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "%s must be a mapping of tag keys to values, not %s", path, kindName(n))
		return
	}
	m := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		p := join(path, k.Value)
		if _, dup := m[k.Value]; dup {
			d.fail(k, p, "tag %q is given more than once in %s", k.Value, path)
			continue
		}
		if v.Kind != yaml.ScalarNode {
			d.fail(v, p, "%s must be a string, not %s", p, kindName(v))
			continue
		}
		d.at(k, p)
		m[k.Value] = v.Value
	}
	*dst = m
}

func (d *decoder) limits(n *yaml.Node, path string, dst *[]qshare.CapacityLimit) {
	d.list(n, path, func(item *yaml.Node, p string) {
		var l qshare.CapacityLimit
		d.fields(item, p, map[string]func(*yaml.Node, string){
			"capacityUnit": func(v *yaml.Node, p string) { d.str(v, p, &l.CapacityUnit) },
			"maxCapacity":  func(v *yaml.Node, p string) { d.int(v, p, &l.MaxCapacity) },
		})
		*dst = append(*dst, l)
	})
}

func (d *decoder) file(n *yaml.Node, f *File) {
	d.fields(n, "", map[string]func(*yaml.Node, string){
		"serviceEnvironments": func(v *yaml.Node, p string) {
			d.list(v, p, func(item *yaml.Node, p string) {
				var e Environment
				var exec *yaml.Node
				d.fields(item, p, map[string]func(*yaml.Node, string){
					"serviceEnvironmentName": func(v *yaml.Node, p string) { d.str(v, p, &e.Name) },
					"serviceEnvironmentType": func(v *yaml.Node, p string) { d.str(v, p, &e.Type) },
					"state":                  func(v *yaml.Node, p string) { d.str(v, p, (*string)(&e.State)) },
					"capacityLimits":         func(v *yaml.Node, p string) { d.limits(v, p, &e.CapacityLimits) },
					"tags":                   func(v *yaml.Node, p string) { d.tags(v, p, &e.Tags) },
					"executor":               func(v *yaml.Node, p string) { exec = v },
				})
				if exec != nil {
					d.executor(exec, p+".executor", &e)
				}
				f.ServiceEnvironments = append(f.ServiceEnvironments, e)
			})
		},
		"schedulingPolicies": func(v *yaml.Node, p string) {
			d.list(v, p, func(item *yaml.Node, p string) {
				var pol Policy
				d.fields(item, p, map[string]func(*yaml.Node, string){
					"name": func(v *yaml.Node, p string) { d.str(v, p, &pol.Name) },
					"quotaSharePolicy": func(v *yaml.Node, p string) {
						pol.QuotaSharePolicy = &qshare.QuotaSharePolicy{}
						d.fields(v, p, map[string]func(*yaml.Node, string){
							"idleResourceAssignmentStrategy": func(v *yaml.Node, p string) {
								d.str(v, p, &pol.QuotaSharePolicy.IdleResourceAssignmentStrategy)
							},
						})
					},
					"fairsharePolicy": func(v *yaml.Node, p string) {
						fp := &FairsharePolicy{}
						pol.FairsharePolicy = fp
						d.fields(v, p, map[string]func(*yaml.Node, string){
							"shareDecaySeconds":  func(v *yaml.Node, p string) { d.intPtr(v, p, &fp.ShareDecaySeconds) },
							"computeReservation": func(v *yaml.Node, p string) { d.intPtr(v, p, &fp.ComputeReservation) },
							"shareDistribution": func(v *yaml.Node, p string) {
								d.list(v, p, func(item *yaml.Node, p string) {
									var w ShareWeight
									d.fields(item, p, map[string]func(*yaml.Node, string){
										"shareIdentifier": func(v *yaml.Node, p string) { d.str(v, p, &w.ShareIdentifier) },
										"weightFactor": func(v *yaml.Node, p string) {
											f, err := strconv.ParseFloat(v.Value, 64)
											if v.Kind != yaml.ScalarNode || (v.Tag != "!!int" && v.Tag != "!!float") || err != nil {
												d.fail(v, p, "%s must be a number, not %s", p, kindName(v))
												return
											}
											w.WeightFactor = f
										},
									})
									fp.ShareDistribution = append(fp.ShareDistribution, w)
								})
							},
						})
					},
					"tags": func(v *yaml.Node, p string) { d.tags(v, p, &pol.Tags) },
				})
				f.SchedulingPolicies = append(f.SchedulingPolicies, pol)
			})
		},
		"capacityPlans": func(v *yaml.Node, p string) {
			d.list(v, p, func(item *yaml.Node, p string) { f.CapacityPlans = append(f.CapacityPlans, d.plan(item, p)) })
		},
		"jobQueues": func(v *yaml.Node, p string) {
			d.list(v, p, func(item *yaml.Node, p string) {
				var q Queue
				d.fields(item, p, map[string]func(*yaml.Node, string){
					"jobQueueName":       func(v *yaml.Node, p string) { d.str(v, p, &q.Name) },
					"jobQueueType":       func(v *yaml.Node, p string) { d.str(v, p, &q.Type) },
					"priority":           func(v *yaml.Node, p string) { d.intPtr(v, p, &q.Priority) },
					"state":              func(v *yaml.Node, p string) { d.str(v, p, (*string)(&q.State)) },
					"schedulingPolicy":   func(v *yaml.Node, p string) { d.str(v, p, &q.SchedulingPolicy) },
					"serviceEnvironment": func(v *yaml.Node, p string) { d.str(v, p, &q.ServiceEnvironment) },
					"tags":               func(v *yaml.Node, p string) { d.tags(v, p, &q.Tags) },
					"jobStateTimeLimitActions": func(v *yaml.Node, p string) {
						d.list(v, p, func(item *yaml.Node, p string) {
							var a qshare.JobStateTimeLimitAction
							d.fields(item, p, map[string]func(*yaml.Node, string){
								"reason": func(v *yaml.Node, p string) { d.str(v, p, &a.Reason) },
								"state":  func(v *yaml.Node, p string) { d.str(v, p, &a.State) },
								"action": func(v *yaml.Node, p string) { d.str(v, p, &a.Action) },
								"maxTimeSeconds": func(v *yaml.Node, p string) {
									var n int64
									if d.int(v, p, &n) {
										a.MaxTimeSeconds = int(max(min(n, math.MaxInt32), math.MinInt32))
									}
								},
							})
							q.JobStateTimeLimitActions = append(q.JobStateTimeLimitActions, a)
						})
					},
					"quotaShares": func(v *yaml.Node, p string) {
						d.list(v, p, func(item *yaml.Node, p string) { q.QuotaShares = append(q.QuotaShares, d.share(item, p)) })
					},
				})
				f.JobQueues = append(f.JobQueues, q)
			})
		},
	})
}

// plan decodes a capacity plan; its times are RFC 3339
// (2026-12-01T00:00:00Z).
func (d *decoder) plan(n *yaml.Node, path string) qshare.CapacityPlan {
	var pl qshare.CapacityPlan
	when := func(dst *time.Time) func(*yaml.Node, string) {
		return func(v *yaml.Node, p string) {
			var s string
			d.str(v, p, &s)
			if s == "" {
				return
			}
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				d.fail(v, p, "%s %q is not an RFC 3339 time: write it as 2026-12-01T00:00:00Z", p, s)
				return
			}
			*dst = t
		}
	}
	d.fields(n, path, map[string]func(*yaml.Node, string){
		"capacityPlanName": func(v *yaml.Node, p string) { d.str(v, p, &pl.Name) },
		"jobQueue":         func(v *yaml.Node, p string) { d.str(v, p, &pl.JobQueue) },
		"quotaShareName":   func(v *yaml.Node, p string) { d.str(v, p, &pl.QuotaShare) },
		"instanceType":     func(v *yaml.Node, p string) { d.str(v, p, &pl.InstanceType) },
		"instanceCount":    func(v *yaml.Node, p string) { d.int(v, p, &pl.InstanceCount) },
		"startTime":        when(&pl.StartTime),
		"endTime":          when(&pl.EndTime),
		"warningSeconds":   func(v *yaml.Node, p string) { d.intPtr(v, p, &pl.WarningSeconds) },
	})
	return pl
}

func (d *decoder) share(n *yaml.Node, path string) Share {
	var s Share
	d.fields(n, path, map[string]func(*yaml.Node, string){
		"quotaShareName": func(v *yaml.Node, p string) { d.str(v, p, &s.Name) },
		"capacityLimits": func(v *yaml.Node, p string) { d.limits(v, p, &s.CapacityLimits) },
		"resourceSharingConfiguration": func(v *yaml.Node, p string) {
			d.fields(v, p, map[string]func(*yaml.Node, string){
				"strategy":    func(v *yaml.Node, p string) { d.str(v, p, (*string)(&s.Strategy)) },
				"borrowLimit": func(v *yaml.Node, p string) { d.intPtr(v, p, &s.BorrowLimit) },
			})
		},
		"preemptionConfiguration": func(v *yaml.Node, p string) {
			d.fields(v, p, map[string]func(*yaml.Node, string){
				"inSharePreemption": func(v *yaml.Node, p string) { d.str(v, p, (*string)(&s.InSharePreemption)) },
			})
		},
		"state": func(v *yaml.Node, p string) { d.str(v, p, (*string)(&s.State)) },
		"tags":  func(v *yaml.Node, p string) { d.tags(v, p, &s.Tags) },
	})
	return s
}
