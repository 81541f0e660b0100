package bench

import (
	"bytes"
	"strings"
	"testing"
)

type sample struct {
	Wall   float64            `json:"wall_s"`
	Name   string             `json:"name"`
	ByKind map[string]float64 `json:"mean_admission_s"`
}

func TestAggregateMediansAndSpread(t *testing.T) {
	runs := []any{
		sample{Wall: 10, Name: "a", ByKind: map[string]float64{"large": 1}},
		sample{Wall: 30, Name: "b", ByKind: map[string]float64{"large": 3}},
		sample{Wall: 12, Name: "c", ByKind: map[string]float64{"large": 2}},
	}
	r, err := Aggregate(runs)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := Lookup(r, "wall_s"); v != 12 {
		t.Errorf("median wall_s = %v, want 12", v)
	}
	if v, _ := Lookup(r, "mean_admission_s.large"); v != 2 {
		t.Errorf("median mean_admission_s.large = %v, want 2", v)
	}
	if r["name"] != "a" {
		t.Errorf("non-numeric field = %v, want the first run's", r["name"])
	}
	sp := r["spread"].(map[string]Spread)
	if sp["wall_s"] != (Spread{10, 30}) || sp["mean_admission_s.large"] != (Spread{1, 3}) {
		t.Errorf("spread = %v", sp)
	}
	if r["runs"] != 3 || len(r["per_run"].([]map[string]any)) != 3 {
		t.Errorf("runs = %v", r["runs"])
	}

	var buf bytes.Buffer
	if err := Table(&buf, "t", r, []Row{{Label: "wall", Key: "wall_s", Format: "%.0f", Unit: "s", Anchor: "Kueue 351 s"}}); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); !strings.Contains(out, "median of 3 runs") || !strings.Contains(out, "12 s") || !strings.Contains(out, "10–30") {
		t.Errorf("table:\n%s", out)
	}
}

func TestAggregateOneRunHasNoSpread(t *testing.T) {
	r, err := Aggregate([]any{sample{Wall: 5}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r["spread"]; ok {
		t.Error("one run reports a spread")
	}
	if _, err := Aggregate([]any{42}); err == nil {
		t.Error("a run that is not an object was accepted")
	}
}
