package soak

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTraceCheck(t *testing.T) {
	for _, tc := range []struct {
		name      string
		trace     string
		succeeded bool
		want      string // substring of the problem; "" for none
		resumes   int
	}{
		{"clean", "1 10 0 100\n1 10 1 200\n1 10 done 300\n", true, "", 0},
		{"resumed", "1 10 0 100\n1 10 1 200\n2 20 1 400\n2 20 2 500\n2 20 done 600\n", true, "", 1},
		{"overlap", "1 10 0 100\n2 20 0 150\n1 10 1 200\n", false, "two attempts at once", 0},
		{"checkpoint lost", "1 10 0 100\n1 10 1 200\n2 20 0 400\n2 20 1 500\n2 20 done 600\n", true, "checkpoint was lost", 0},
		{"no done", "1 10 0 100\n1 10 1 200\n", true, "no done line", 0},
		{"missing step", "1 10 0 100\n1 10 done 300\n", true, "without running step 1", 0},
		{"torn line ignored", "1 10 0 100\n1 10 1 200\n1 10 do", false, "", 0},
		{"never ran", "", false, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "trace")
			if tc.trace != "" {
				if err := os.WriteFile(p, []byte(tc.trace), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			tr, err := readTrace(p)
			if err != nil {
				t.Fatal(err)
			}
			resumes, _, problems := tr.check("j", 2, tc.succeeded)
			got := strings.Join(problems, "; ")
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("check = %q, want %q", got, tc.want)
			}
			if resumes != tc.resumes {
				t.Fatalf("resumes = %d, want %d", resumes, tc.resumes)
			}
		})
	}
}
