package bench

import (
	"reflect"
	"testing"
)

// TestRowsOf: a result struct's row tags make its table, in field order;
// a Latency gives its p50 and p99 rows; an anchor keeps its semicolons.
func TestRowsOf(t *testing.T) {
	type result struct {
		Jobs   int      `json:"jobs" row:"jobs;%.0f"`
		Hidden float64  `json:"hidden"`
		Submit Latency  `json:"submit_latency" row:"submit latency;%.2f;ms;target < 5 ms"`
		Slurm  *Latency `json:"slurm_latency,omitempty" row:"Slurm latency;%.1f;ms"`
		Ratio  float64  `json:"ratio,omitempty" row:"ratio;%.2f;;target ≥ 20; with slurm ≥ 0.9"`
		TmpDir string   `json:"tmp_dir" row:"$TMPDIR;%s"`
		NoRow  string   `json:"no_row"`
	}
	want := []Row{
		{Label: "jobs", Key: "jobs", Format: "%.0f"},
		{Label: "submit latency p50", Key: "submit_latency.p50_ms", Format: "%.2f", Unit: "ms"},
		{Label: "submit latency p99", Key: "submit_latency.p99_ms", Format: "%.2f", Unit: "ms", Anchor: "target < 5 ms"},
		{Label: "Slurm latency p50", Key: "slurm_latency.p50_ms", Format: "%.1f", Unit: "ms"},
		{Label: "Slurm latency p99", Key: "slurm_latency.p99_ms", Format: "%.1f", Unit: "ms"},
		{Label: "ratio", Key: "ratio", Format: "%.2f", Anchor: "target ≥ 20; with slurm ≥ 0.9"},
		{Label: "$TMPDIR", Key: "tmp_dir", Format: "%s"},
	}
	if got := RowsOf(result{}); !reflect.DeepEqual(got, want) {
		t.Fatalf("RowsOf:\n got %+v\nwant %+v", got, want)
	}
}

// TestBenchRowsResolve: every row of each benchmark's table names a
// figure its result reports, so no row of the table stays empty.
func TestBenchRowsResolve(t *testing.T) {
	for name, c := range map[string]struct {
		rows   []Row
		result any
	}{
		"e2e": {E2ERows(), E2EResult{SubmitLatency: Latency{P50: 1}, SlurmSubmitLatency: &Latency{P50: 1},
			StartLatency: &Latency{P50: 1}, EngineStartLatency: &Latency{P50: 1}}},
		"kube":     {RowsOf(KubeResult{}), KubeResult{}},
		"failover": {RowsOf(FailoverResult{}), FailoverResult{}},
		"engine":   {RowsOf(EngineResult{}), EngineResult{}},
	} {
		if len(c.rows) < 5 {
			t.Fatalf("%s: %d rows", name, len(c.rows))
		}
		report, err := Aggregate([]any{fill(c.result)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range c.rows {
			_, num := Lookup(report, r.Key)
			_, str := lookupString(report, r.Key)
			if !num && !str {
				t.Errorf("%s: row %q: key %s is not in the report", name, r.Label, r.Key)
			}
		}
	}
}

// fill returns v (a struct) with every number and string field set, so
// that omitempty leaves none out.
func fill(v any) any {
	p := reflect.New(reflect.TypeOf(v))
	p.Elem().Set(reflect.ValueOf(v))
	e := p.Elem()
	for i := range e.NumField() {
		f := e.Field(i)
		if !f.CanSet() {
			continue // an unexported field, which no report shows
		}
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(1)
		case reflect.Float64:
			f.SetFloat(1)
		case reflect.String:
			f.SetString("x")
		}
	}
	return e.Interface()
}
