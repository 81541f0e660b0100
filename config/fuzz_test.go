package config

import (
	"errors"
	"os"
	"testing"

	"qshare"
)

// FuzzParse: whatever the input, Parse never panics, and it either returns
// a file that validates or an *Errors (an EINVALID error) with at least one
// problem, each with a message.
//
//	go test ./config -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, p := range []string{"../examples/three-shares.yaml", "../examples/philly/philly.yaml"} {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"serviceEnvironments":[{"serviceEnvironmentName":"e","capacityLimits":[{"capacityUnit":"t","maxCapacity":1}]}]}`))
	f.Add([]byte("jobQueues: [{quotaShares: [{capacityLimits: [{maxCapacity: 0}]}]}]"))
	f.Add([]byte("a: &x [*x]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse("fuzz", data, Options{})
		if err == nil {
			if cfg == nil || cfg.Validate(Options{}) != nil {
				t.Fatalf("Parse accepted a file that does not validate")
			}
			cfg.Engine()
			return
		}
		var errs *Errors
		if !errors.As(err, &errs) || len(errs.Problems) == 0 || qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Fatalf("Parse error %T %v is not an *Errors with problems", err, err)
		}
		for _, p := range errs.Problems {
			if p.Message == "" {
				t.Fatalf("a problem without a message: %+v", p)
			}
		}
	})
}
