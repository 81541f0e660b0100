package trainingjob

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

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
