package plan

import (
	"maps"
	"testing"

	"qshare"
	"qshare/config"
)

// TestEnvTags: an environment's `executor:` is its tag qshare:executor;
// without it the server's executor tag is kept, and `executor:` alone
// leaves the other tags as the server has them.
func TestEnvTags(t *testing.T) {
	have := map[string]string{"team": "a", qshare.TagExecutor: "hpc"}
	for _, c := range []struct {
		name string
		e    config.Environment
		want map[string]string
	}{
		{"neither", config.Environment{}, nil},
		{"executor alone", config.Environment{Executor: "k8s"}, map[string]string{"team": "a", qshare.TagExecutor: "k8s"}},
		{"tags alone", config.Environment{Tags: map[string]string{"team": "b"}}, map[string]string{"team": "b", qshare.TagExecutor: "hpc"}},
		{"both", config.Environment{Tags: map[string]string{}, Executor: "k8s"}, map[string]string{qshare.TagExecutor: "k8s"}},
	} {
		if got := envTags(have, c.e); !maps.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if got := envTags(nil, config.Environment{Executor: "k8s"}); !maps.Equal(got, map[string]string{qshare.TagExecutor: "k8s"}) {
		t.Errorf("a new environment: %v", got)
	}
}
