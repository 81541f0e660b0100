package trainingjob

import (
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"qshare"
)

func TestDemand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		payload string
		want    qshare.Capacity
		errHas  string
	}{
		{"type and count", `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":2}}`, qshare.Capacity{"ml.g5.xlarge": 2}, ""},
		{"missing count means 1", `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"}}`, qshare.Capacity{"ml.g5.xlarge": 1}, ""},
		{"groups summed per type", `{"ResourceConfig":{"InstanceGroups":[
			{"InstanceGroupName":"a","InstanceType":"ml.g5.xlarge","InstanceCount":2},
			{"InstanceGroupName":"b","InstanceType":"ml.p4d.24xlarge","InstanceCount":1},
			{"InstanceGroupName":"c","InstanceType":"ml.g5.xlarge"}]}}`, qshare.Capacity{"ml.g5.xlarge": 3, "ml.p4d.24xlarge": 1}, ""},
		{"no type", `{"ResourceConfig":{"InstanceCount":2}}`, nil, "no instance type"},
		{"zero count", `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":0}}`, nil, "from 1 to"},
		{"both", `{"ResourceConfig":{"InstanceType":"x","InstanceGroups":[{"InstanceType":"y"}]}}`, nil, "both"},
		{"group without type", `{"ResourceConfig":{"InstanceGroups":[{"InstanceCount":1}]}}`, nil, "InstanceGroups[0].InstanceType"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Parse(tc.payload)
			if err != nil {
				t.Fatal(err)
			}
			d, err := r.Demand()
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || qshare.ErrorCodeOf(err) != qshare.EINVALID {
					t.Fatalf("err = %v, want EINVALID containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(d, tc.want) {
				t.Fatalf("Demand = %v, %v; want %v", d, err, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for payload, want := range map[string]string{
		"":    "required",
		"[1]": "expected a JSON object",
		"{":   "not a valid",
		`{"ResourceConfig":{"InstanceCount":"two"}}`: "ResourceConfig.InstanceCount should be an integer",
		`{} {}`: "after the JSON object",
	} {
		_, err := Parse(payload)
		if err == nil || !strings.Contains(err.Error(), want) || qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Errorf("Parse(%q) = %v, want EINVALID containing %q", payload, err, want)
		}
	}
}

func TestCommandAndRuntime(t *testing.T) {
	r, err := Parse(`{"AlgorithmSpecification":{"TrainingImage":"img","ContainerEntrypoint":["python3","train.py"],"ContainerArguments":["--epochs","3"]},"StoppingCondition":{"MaxRuntimeInSeconds":300},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1}}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Command(); !reflect.DeepEqual(got, []string{"python3", "train.py", "--epochs", "3"}) {
		t.Errorf("Command = %q", got)
	}
	if r.MaxRuntimeSeconds() != 300 {
		t.Errorf("MaxRuntimeSeconds = %d", r.MaxRuntimeSeconds())
	}
}

// TestPatterns checks the byte-by-byte checks against the patterns of
// SageMaker's API reference, compiled as regexps, on random strings made
// of the characters at the patterns' edges. (The length limits of
// channel names and Environment keys are checked apart, in Validate.)
func TestPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern string
		maxLen  int // the length constraint beside the pattern; 0 for none
		check   func(string) bool
	}{
		{`^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$`, MaxTrainingJobName, ValidTrainingJobName},
		{`^[a-zA-Z_][a-zA-Z0-9_]*$`, 0, validEnvKey},
		{`^[A-Za-z0-9\.\-_]+$`, 0, validChannelName},
	} {
		re := regexp.MustCompile(c.pattern)
		rng := rand.New(rand.NewPCG(3, 4))
		const alphabet = "aZz09-_.A/ \n\x00é"
		check := func(s string) {
			want := re.MatchString(s) && (c.maxLen == 0 || len(s) <= c.maxLen)
			if got := c.check(s); got != want {
				t.Fatalf("%s: %q gives %v, the pattern %v", c.pattern, s, got, want)
			}
		}
		for _, s := range []string{"", "a", "-", "_", ".", "a-", "-a", "a--b", strings.Repeat("a", 63), strings.Repeat("a", 64),
			strings.Repeat("a-", 31) + "a", strings.Repeat("a-", 32) + "a", "é", "a\x00"} {
			check(s)
		}
		for range 20000 {
			n := rng.IntN(8)
			if rng.IntN(10) == 0 {
				n = 60 + rng.IntN(8)
			}
			var b strings.Builder
			for range n {
				r := []rune(alphabet)
				b.WriteRune(r[rng.IntN(len(r))])
			}
			check(b.String())
		}
	}
}
