package trainingjob

import (
	"strings"
	"testing"

	"github.com/google/uuid"
)

func TestAttemptName(t *testing.T) {
	const id = "01a2307e-f70a-74a8-b148-db4c9a80f0f7"
	const hex = "01a2307ef70a74a8b148db4c9a80f0f7"
	for _, tc := range []struct {
		name string
		n    int
		want string
	}{
		// The notebook's payload name: ModelTrainer's base_job_name and a timestamp.
		{"hello-world-simple-job-2026-12-04-21-12-44-123", 1, "awsbatchhello-world-simple-jo" + hex + "-1"},
		{"hello-world-simple-job-2026-12-04-21-12-44-123", 12, "awsbatchhello-world-simple-j" + hex + "-12"},
		{"bert-large", 3, "awsbatchbert-large" + hex + "-3"},
		// A job name (no TrainingJobName in the payload) may hold '_'.
		{"qs1_job_HIGH", 1, "awsbatchqs1-job-high" + hex + "-1"},
		{"", 1, "awsbatch" + hex + "-1"},
		{"x", 1 << 30, "awsbatchx" + hex + "-1073741824"},
		{"x", 1<<31 - 1, "awsbatchx" + hex + "-2147483647"},
	} {
		got := AttemptName(tc.name, id, tc.n)
		if got != tc.want {
			t.Errorf("AttemptName(%q, %d) = %q, want %q", tc.name, tc.n, got, tc.want)
		}
		if !ValidTrainingJobName(got) {
			t.Errorf("AttemptName(%q, %d) = %q is not a valid TrainingJobName (%d characters)", tc.name, tc.n, got, len(got))
		}
		gotID, gotN, ok := ParseAttemptName(strings.ToUpper(got))
		if !ok || gotID != id || gotN != tc.n {
			t.Errorf("ParseAttemptName(%q) = %q, %d, %v; want %q, %d", got, gotID, gotN, ok, id, tc.n)
		}
		if LegacyAttemptName(got) {
			t.Errorf("LegacyAttemptName(%q) is true for a new name", got)
		}
	}
}

// TestAttemptNameUnique: every attempt of every job gets its own name,
// even where the jobs' names are the same once cut, and it always parses
// back.
func TestAttemptNameUnique(t *testing.T) {
	seen := map[string]bool{}
	long := strings.Repeat("a", 63)
	for i := range 200 {
		id := uuid.Must(uuid.NewV7()).String()
		for n := 1; n <= 12; n++ {
			for _, name := range []string{[]string{long, long[:21] + "1"}[i%2]} {
				got := AttemptName(name, id, n)
				if seen[got] {
					t.Fatalf("AttemptName(%q, %s, %d) = %q twice", name, id, n, got)
				}
				seen[got] = true
				if len(got) > MaxTrainingJobName || !ValidTrainingJobName(got) {
					t.Fatalf("AttemptName(%q, %s, %d) = %q is not valid", name, id, n, got)
				}
				if pid, pn, ok := ParseAttemptName(got); !ok || pid != id || pn != n {
					t.Fatalf("ParseAttemptName(%q) = %q, %d, %v", got, pid, pn, ok)
				}
			}
		}
	}
}

func TestParseAttemptNameRefuses(t *testing.T) {
	for _, name := range []string{
		"",
		"awsbatch",
		"awsbatchbert-large7c763339ef63f6dbbe26ff972441a681", // the old form
		"awsbatchbert-large7c763339ef63f6dbbe26ff972441a681-0",
		"awsbatchbert-large7c763339ef63f6dbbe26ff972441a681-01",
		"awsbatchbert-large7c763339ef63f6dbbe26ff972441a681--1",
		"awsbatchbert-large7c763339ef63f6dbbe26ff972441a68g-1",
		"awsbatch7c763339-ef63-f6db-be26-ff972441a681-1",
		"pytorch-training-2026-11-30-02-05-13-123",
		"awsbatch7c763339ef63f6dbbe26ff972441a681-99999999999",
		"other7c763339ef63f6dbbe26ff972441a681-1",
		strings.Repeat("a", 40) + "awsbatch7c763339ef63f6dbbe26ff972441a681-1",
	} {
		if id, n, ok := ParseAttemptName(name); ok {
			t.Errorf("ParseAttemptName(%q) = %q, %d, true; want false", name, id, n)
		}
	}
	if !LegacyAttemptName("AWSBatchbert-large7c763339ef63f6dbbe26ff972441a681") {
		t.Error("LegacyAttemptName refuses an old name")
	}
	for _, name := range []string{"awsbatch", "bert7c763339ef63f6dbbe26ff972441a681", "awsbatchbert-large7c763339ef63f6dbbe26ff972441a68x"} {
		if LegacyAttemptName(name) {
			t.Errorf("LegacyAttemptName(%q) is true", name)
		}
	}
}

func TestNameOfARN(t *testing.T) {
	for in, want := range map[string]string{
		AttemptARN("us-east-1", "000000000000", "awsbatchx-1"):    "awsbatchx-1",
		"arn:aws:batch:us-east-1:000000000000:job-queue/training": "",
		"training-job/x": "",
	} {
		if got := NameOfARN(in); got != want {
			t.Errorf("NameOfARN(%q) = %q, want %q", in, got, want)
		}
	}
}
