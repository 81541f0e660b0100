package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"text/tabwriter"
)

// Spread is the range of one figure over the runs of a benchmark.
type Spread struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// Aggregate turns the results of several runs of one benchmark (structs of
// the same type, with JSON tags) into one JSON object: every numeric field,
// nested objects included, is the median over the runs; other fields are
// those of the first run. Three fields are added: "runs" (the count),
// "spread" (min and max of every numeric field, by dotted path) and
// "per_run" (each run as it was).
func Aggregate(runs []any) (map[string]any, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("bench: no runs to aggregate")
	}
	maps := make([]map[string]any, len(runs))
	for i, r := range runs {
		data, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("bench: run %d: %w", i+1, err)
		}
		if err := json.Unmarshal(data, &maps[i]); err != nil {
			return nil, fmt.Errorf("bench: run %d is not a JSON object: %w", i+1, err)
		}
	}
	spread := map[string]Spread{}
	vals := make([]any, len(maps))
	for i, m := range maps {
		vals[i] = m
	}
	out := merge(vals, "", spread).(map[string]any)
	out["runs"] = len(runs)
	if len(runs) > 1 {
		out["spread"] = spread
		out["per_run"] = maps
	}
	return out, nil
}

// merge combines the same value taken from each run.
func merge(vals []any, path string, spread map[string]Spread) any {
	switch v0 := vals[0].(type) {
	case float64:
		xs := make([]float64, 0, len(vals))
		for _, v := range vals {
			if f, ok := v.(float64); ok {
				xs = append(xs, f)
			}
		}
		if len(xs) != len(vals) {
			return v0
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range xs {
			lo, hi = min(lo, x), max(hi, x)
		}
		spread[path] = Spread{Min: lo, Max: hi}
		return round(Median(xs), 6)
	case map[string]any:
		out := map[string]any{}
		for k := range v0 {
			sub := make([]any, 0, len(vals))
			for _, v := range vals {
				if m, ok := v.(map[string]any); ok {
					sub = append(sub, m[k])
				}
			}
			if len(sub) != len(vals) {
				out[k] = v0[k]
				continue
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			out[k] = merge(sub, p, spread)
		}
		return out
	default:
		return v0
	}
}

// Row is one line of a benchmark's human table.
type Row struct {
	// Label names the figure for people; Key is its dotted JSON path.
	Label string
	Key   string
	// Format prints the value (fmt verb, such as "%.1f"); "%.3g" when empty.
	Format string
	// Unit follows the value.
	Unit string
	// Anchor is what the figure is compared with: a target, a published
	// figure, or the side-by-side measurement.
	Anchor string
}

// RowsOf returns the human table of a result struct (result is a value of
// its type): one Row per field with a row tag, in the order of the fields.
// The tag is "label;format;unit;anchor" (unit and anchor may be left out;
// the anchor is the rest, semicolons and all), and the row's key is the
// field's JSON name. A field of type Latency or *Latency gives two rows,
// its p50 and its p99, their labels the tag's with " p50" and " p99".
func RowsOf(result any) []Row {
	t := reflect.TypeOf(result)
	var rows []Row
	for i := range t.NumField() {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("row")
		if !ok {
			continue
		}
		parts := append(strings.SplitN(tag, ";", 4), "", "", "")
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		r := Row{Label: parts[0], Key: key, Format: parts[1], Unit: parts[2], Anchor: parts[3]}
		if f.Type == reflect.TypeFor[Latency]() || f.Type == reflect.TypeFor[*Latency]() {
			p50, p99 := r, r
			p50.Label, p50.Key, p50.Anchor = r.Label+" p50", key+".p50_ms", ""
			p99.Label, p99.Key = r.Label+" p99", key+".p99_ms"
			rows = append(rows, p50, p99)
			continue
		}
		rows = append(rows, r)
	}
	return rows
}

// Lookup returns the number at a dotted path of an aggregated report.
func Lookup(report map[string]any, key string) (float64, bool) {
	var cur any = report
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return 0, false
		}
		cur = m[part]
	}
	switch v := cur.(type) {
	case float64:
		return v, true
	case int:
		return float64(v), true
	}
	return 0, false
}

// lookupString returns the string at a dotted key of a report.
func lookupString(report map[string]any, key string) (string, bool) {
	var cur any = report
	for _, part := range strings.Split(key, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return "", false
		}
		cur = m[part]
	}
	s, ok := cur.(string)
	return s, ok
}

// Table prints an aggregated report as a table: one row per Row, with the
// median, and with several runs the min–max spread.
func Table(w io.Writer, title string, report map[string]any, rows []Row) error {
	n, _ := report["runs"].(int)
	spread, _ := report["spread"].(map[string]Spread)
	fmt.Fprintf(w, "%s", title)
	if n > 1 {
		fmt.Fprintf(w, " (median of %d runs)", n)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if n > 1 {
		fmt.Fprintln(tw, "figure\tvalue\tspread (min–max)\tanchor")
	} else {
		fmt.Fprintln(tw, "figure\tvalue\tanchor")
	}
	for _, r := range rows {
		f := r.Format
		if f == "" {
			f = "%.3g"
		}
		v, ok := Lookup(report, r.Key)
		val := "—"
		if ok {
			val = strings.TrimSpace(fmt.Sprintf(f, v) + " " + r.Unit)
		} else if s, ok := lookupString(report, r.Key); ok && s != "" {
			val = s // a condition of the run, such as a file system
		}
		if n > 1 {
			sp := "—"
			if s, ok := spread[r.Key]; ok {
				sp = fmt.Sprintf(f+"–"+f, s.Min, s.Max)
				if s.Min == s.Max {
					sp = "(same)"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Label, val, sp, r.Anchor)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Label, val, r.Anchor)
		}
	}
	return tw.Flush()
}

// WriteJSON prints an aggregated report as one indented JSON object with
// its keys sorted.
func WriteJSON(w io.Writer, report map[string]any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(report)
}
