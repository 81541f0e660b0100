package bench

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
)

// Series is one set of bars of a grouped bar chart: a value per group.
type Series struct {
	Name   string
	Color  string
	Values map[string]float64
}

// WriteBarsSVG writes a grouped bar chart as a standalone SVG: one group
// of bars per entry of groups, one bar per series, each labelled with its
// value, on a linear axis from zero. unit follows the values ("s").
func WriteBarsSVG(w io.Writer, title, unit string, groups []string, series []Series) error {
	const (
		width, height       = 720, 360
		left, right         = 60, 20
		top, bottom         = 50, 60
		plotW, plotH        = width - left - right, height - top - bottom
		groupGap, barGapPct = 0.25, 0.08
	)
	maxV := 0.0
	for _, s := range series {
		for _, g := range groups {
			if v, ok := s.Values[g]; ok && !math.IsNaN(v) {
				maxV = max(maxV, v)
			}
		}
	}
	if maxV <= 0 {
		maxV = 1
	}
	step := niceStep(maxV / 5)
	axisMax := math.Ceil(maxV/step) * step
	y := func(v float64) float64 { return top + plotH - v/axisMax*plotH }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for v := 0.0; v <= axisMax+step/2; v += step {
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, left+plotW, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, trimFloat(v))
	}
	fmt.Fprintf(&b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">%s</text>`+"\n", top+plotH/2, top+plotH/2, html.EscapeString(unit))
	groupW := float64(plotW) / float64(max(1, len(groups)))
	barW := groupW * (1 - groupGap) / float64(max(1, len(series)))
	for gi, g := range groups {
		x0 := float64(left) + float64(gi)*groupW + groupW*groupGap/2
		for si, s := range series {
			v, ok := s.Values[g]
			if !ok || math.IsNaN(v) {
				continue
			}
			x := x0 + float64(si)*barW
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s %s</title></rect>`+"\n",
				x+barW*barGapPct/2, y(v), barW*(1-barGapPct), y(0)-y(v), s.Color, html.EscapeString(s.Name), html.EscapeString(g), trimFloat(v), html.EscapeString(unit))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", x+barW/2, y(v)-4, trimFloat(v))
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x0+groupW*(1-groupGap)/2, top+plotH+18, html.EscapeString(g))
	}
	lx := float64(left)
	for _, s := range series {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, height-22, s.Color)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", lx+16, height-12, html.EscapeString(s.Name))
		lx += 16 + 7*float64(len(s.Name)) + 24
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// niceStep rounds a raw axis step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// WriteKueueAdmissionSVG charts the mean admission time per class of an
// aggregated Kueue report: the simulator's ideal, qshare's measured
// median, and Kueue's published mean.
func WriteKueueAdmissionSVG(w io.Writer, report map[string]any, pub KueuePublished) error {
	classes := []string{"large", "medium", "small"}
	ideal, real := map[string]float64{}, map[string]float64{}
	for _, c := range classes {
		if v, ok := Lookup(report, "ideal.mean_admission_s."+c); ok {
			ideal[c] = v
		}
		if v, ok := Lookup(report, "mean_admission_s."+c); ok {
			real[c] = v
		}
	}
	name, _ := report["workload"].(string)
	return WriteBarsSVG(w, "Mean time to admission per class: "+name, "seconds", classes, []Series{
		{Name: "qshare ideal (simulator)", Color: "#9ecae1", Values: ideal},
		{Name: "qshare (real server)", Color: "#3182bd", Values: real},
		{Name: "Kueue (published)", Color: "#e6550d", Values: pub.MeanAdmissionS},
	})
}
