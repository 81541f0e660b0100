package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"qshare/executor"
)

// The executors file (qshare serve --executors FILE): the server's named
// executors, each with its kind and the settings that its flags take when
// it is the only one. A service environment names the one that runs its
// jobs with the tag qshare:executor (docs/executors.md). Without the file,
// --executor KIND is the one executor, named "default".
//
//	gpu-box:  {kind: process, gpus: "0,1", runAs: jobs}
//	prod-k8s: {kind: kubernetes, kubeconfig: /etc/qshare/prod.kubeconfig, namespace: training}
//	hpc:      {kind: slurm, slurmConfig: /etc/qshare/slurm.yaml}

// executorKeys lists, per kind, the settings (the config file's keys of
// Settings) that an executor of that kind takes in the executors file,
// beside kind. A kind that is not listed takes commonExecutorKeys.
var executorKeys = map[string][]string{
	"process":    {"runAs", "passEnv", "gpus", "instanceTypes", "cgroupRoot"},
	"container":  {"runAs", "gpus", "instanceTypes", "containerHost", "pull"},
	"simulated":  {"simDuration"},
	"slurm":      {"slurmConfig"},
	"kubernetes": {"kubeconfig", "namespace", "kubeConfig", "instanceTypes"},
}

// commonExecutorKeys are the settings of a kind that executorKeys does
// not list.
var commonExecutorKeys = []string{"runAs", "passEnv"}

// requiredExecutorKeys lists, per kind, the settings it cannot go without.
var requiredExecutorKeys = map[string][]string{
	"slurm": {"slurmConfig"},
}

// namedExecutor is one executor of the server: its name, and the settings
// its constructor gets (the server's, with the executor's own from the
// file, and Executor set to its kind).
type namedExecutor struct {
	name string
	s    Settings
}

// serverExecutors returns the executors s names: those of its executors
// file, or the one of --executor, named "default".
func serverExecutors(s Settings) ([]namedExecutor, error) {
	if s.Executors == "" {
		if _, ok := executors[s.Executor]; !ok {
			return nil, fmt.Errorf("--executor %q is not known: use %s", s.Executor, strings.Join(ExecutorNames(), " or "))
		}
		return []namedExecutor{{name: executor.DefaultName, s: s}}, nil
	}
	if keys := givenExecutorKeys(s); len(keys) > 0 {
		return nil, fmt.Errorf("--executors %s names the executors, each with its own settings: give %s in the file, for each executor that takes it, not to the server", s.Executors, strings.Join(keys, ", "))
	}
	b, err := os.ReadFile(s.Executors)
	if err != nil {
		return nil, fmt.Errorf("--executors: %w", err)
	}
	return parseExecutors(s.Executors, b, s)
}

// parseExecutors reads an executors file (named path in errors) over the
// server's settings base.
func parseExecutors(path string, b []byte, base Settings) ([]namedExecutor, error) {
	bad := func(line int, format string, a ...any) error {
		where := path
		if line > 0 {
			where = fmt.Sprintf("%s line %d", path, line)
		}
		return fmt.Errorf("executors file %s: %s (see docs/executors.md)", where, fmt.Sprintf(format, a...))
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, bad(0, "it is empty: name at least one executor, such as `default: {kind: process}`")
		}
		return nil, bad(0, "%v", err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, bad(root.Line, "it must map each executor's name to its settings, such as `gpu-box: {kind: process}`")
	}
	if len(root.Content) == 0 {
		return nil, bad(root.Line, "it names no executor: name at least one, such as `default: {kind: process}`")
	}
	var out []namedExecutor
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], root.Content[i+1]
		name := kn.Value
		if kn.Kind != yaml.ScalarNode || !executor.ValidName(name) {
			return nil, bad(kn.Line, "%q is not a valid executor name: use 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or digit", truncate(name, 64))
		}
		if seen[name] {
			return nil, bad(kn.Line, "executor %s is named twice", name)
		}
		seen[name] = true
		if vn.Kind != yaml.MappingNode {
			return nil, bad(vn.Line, "executor %s: give its settings as a mapping, such as `{kind: process}`", name)
		}
		kind, kindLine := "", vn.Line
		given := map[string]int{}
		for j := 0; j+1 < len(vn.Content); j += 2 {
			k := vn.Content[j]
			if k.Value == "kind" {
				kind, kindLine = vn.Content[j+1].Value, k.Line
				continue
			}
			given[k.Value] = k.Line
		}
		if kind == "" {
			return nil, bad(vn.Line, "executor %s has no kind: give kind: %s", name, strings.Join(ExecutorNames(), ", "))
		}
		if _, ok := executors[kind]; !ok {
			return nil, bad(kindLine, "executor %s: kind %q is not known: use %s", name, truncate(kind, 64), strings.Join(ExecutorNames(), ", "))
		}
		allowed, ok := executorKeys[kind]
		if !ok {
			allowed = commonExecutorKeys
		}
		for k, line := range given {
			if !contains(allowed, k) {
				takes := "no other setting"
				if len(allowed) > 0 {
					takes = strings.Join(allowed, ", ")
				}
				return nil, bad(line, "executor %s: %q is not a setting of a %s executor: it takes kind and %s", name, truncate(k, 64), kind, takes)
			}
		}
		for _, k := range requiredExecutorKeys[kind] {
			if _, ok := given[k]; !ok {
				return nil, bad(vn.Line, "executor %s: a %s executor needs %s", name, kind, k)
			}
		}
		s := base
		s.Executor = kind
		if err := vn.Decode(&s); err != nil {
			return nil, bad(vn.Line, "executor %s: %v", name, err)
		}
		s.Executor, s.Executors = kind, ""
		out = append(out, namedExecutor{name: name, s: s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// givenExecutorKeys returns the executor settings of s that are set (not
// their zero value), by their config keys: with an executors file they go
// in the file.
func givenExecutorKeys(s Settings) []string {
	keys := map[string]bool{}
	for _, ks := range executorKeys {
		for _, k := range ks {
			keys[k] = true
		}
	}
	var set []string
	v := reflect.ValueOf(s)
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if keys[tag] && !v.Field(i).IsZero() {
			set = append(set, tag)
		}
	}
	sort.Strings(set)
	return set
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// newExecutorSet makes every executor of the server; on error it closes
// those it made.
// listenAddr is the server's listen address (Settings.listenAddr).
func newExecutorSet(ctx context.Context, named []namedExecutor, listenAddr string, grace time.Duration, log *slog.Logger) (*executor.Set, error) {
	m := map[string]executor.Executor{}
	for _, n := range named {
		n.s.listenAddr = listenAddr
		l := log
		if len(named) > 1 || n.name != executor.DefaultName {
			l = log.With("executor", n.name)
		}
		ex, err := executors[n.s.Executor](ctx, n.s, grace, l)
		if err != nil {
			for _, made := range m {
				made.Close() //nolint:errcheck // closing on the way out
			}
			if len(named) == 1 && n.name == executor.DefaultName {
				return nil, fmt.Errorf("executor %s: %w", n.s.Executor, err)
			}
			return nil, fmt.Errorf("executor %s (%s): %w", n.name, n.s.Executor, err)
		}
		m[n.name] = ex
	}
	return executor.NewSet(m)
}

// executorsNote is how the listening line names the executors: the kind
// alone for one named default, else each name with its kind.
func executorsNote(named []namedExecutor) string {
	if len(named) == 1 && named[0].name == executor.DefaultName {
		return "executor " + named[0].s.Executor
	}
	parts := make([]string, len(named))
	for i, n := range named {
		parts[i] = n.name + " (" + n.s.Executor + ")"
	}
	return "executors " + strings.Join(parts, ", ")
}
