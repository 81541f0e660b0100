package sim

import (
	"bytes"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// The plots are plain SVG written by hand: a few paths and text elements,
// readable in any browser, with no dependency. Every number is printed with
// fixed precision, so the same report gives the same bytes.

var palette = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
	"#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#1f77b4", "#8c564b",
}

func color(i int) string { return palette[i%len(palette)] }

const (
	plotW, plotH       = 960.0, 360.0
	marginL, marginR   = 70.0, 190.0
	marginT, marginB   = 36.0, 44.0
	innerW             = plotW - marginL - marginR
	innerH             = plotH - marginT - marginB
	maxLegend          = 20
	svgHeader          = `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" font-family="sans-serif" font-size="12">` + "\n"
	hatchPatternFormat = `<pattern id="hatch%d" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="%s" fill-opacity="0.35"/><line x1="0" y1="0" x2="0" y2="6" stroke="%s" stroke-width="3"/></pattern>`
)

type svg struct{ bytes.Buffer }

func (s *svg) f(format string, args ...any) { fmt.Fprintf(&s.Buffer, format, args...) }

// begin writes the opening of a plot h high.
func (s *svg) begin(h float64) { s.f(svgHeader, plotW, h, plotW, h) }

// title writes a plot's heading, escaped.
func (s *svg) title(text string) {
	s.f(`<text x="%s" y="22" font-size="15">%s</text>`+"\n", num(marginL), html.EscapeString(text))
}

// end closes the plot and returns its bytes.
func (s *svg) end() []byte {
	s.f("</svg>\n")
	return s.Bytes()
}

func num(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		x = 0
	}
	return fmt.Sprintf("%.1f", x)
}

// niceStep returns a round tick step for a range.
func niceStep(span float64, ticks int) float64 {
	if span <= 0 {
		return 1
	}
	raw := span / float64(ticks)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// timeUnit picks the unit of a time axis of the given span in seconds.
func timeUnit(span float64) (float64, string) {
	switch {
	case span >= 3*86400:
		return 86400, "days"
	case span >= 3*3600:
		return 3600, "hours"
	case span >= 180:
		return 60, "minutes"
	}
	return 1, "seconds"
}

// frame draws the axes of a panel at (x0,y0) of height h: x is time from 0
// to span seconds, y from 0 to ymax.
func (s *svg) frame(y0, h, span, ymax float64, ylabel string, yfmt func(float64) string) {
	s.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#999"/>`+"\n", num(marginL), num(y0), num(innerW), num(h))
	unit, uname := timeUnit(span)
	step := niceStep(span/unit, 8)
	for v := 0.0; v <= span/unit+1e-9; v += step {
		x := marginL + v*unit/span*innerW
		s.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/><text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n",
			num(x), num(y0), num(x), num(y0+h), num(x), num(y0+h+16), trimNum(v))
	}
	s.f(`<text x="%s" y="%s" text-anchor="middle">time (%s)</text>`+"\n", num(marginL+innerW/2), num(y0+h+34), uname)
	ystep := niceStep(ymax, 5)
	for v := 0.0; v <= ymax+1e-9; v += ystep {
		y := y0 + h - v/ymax*h
		s.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/><text x="%s" y="%s" text-anchor="end">%s</text>`+"\n",
			num(marginL), num(y), num(marginL+innerW), num(y), num(marginL-6), num(y+4), yfmt(v))
	}
	s.f(`<text transform="translate(16,%s) rotate(-90)" text-anchor="middle">%s</text>`+"\n", num(y0+h/2), html.EscapeString(ylabel))
}

func trimNum(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// buckets returns how many buckets cover the makespan (0 when the report
// has no series), each one's width in seconds, and the span a plot's time
// axis covers: the makespan, or one bucket when that is longer.
func (r *Report) buckets() (n int, bs, span float64) {
	s := r.Series
	if s == nil || s.BucketS <= 0 {
		return 0, 0, 0
	}
	n = int(math.Ceil(r.MakespanS / s.BucketS))
	if len(s.Cross) < n {
		n = len(s.Cross)
	}
	return max(n, 1), s.BucketS, math.Max(r.MakespanS, s.BucketS)
}

// stacked draws layers stacked bottom-up; layers[i][b] is the mean height of
// layer i in bucket b. fills[i] is each layer's fill.
func (s *svg) stacked(y0, h, ymax, bucketS, span float64, layers [][]float64, fills []string) {
	n := 0
	if len(layers) > 0 {
		n = len(layers[0])
	}
	base := make([]float64, n)
	for i, l := range layers {
		top := make([]float64, n)
		empty := true
		for b := 0; b < n; b++ {
			top[b] = base[b] + l[b]
			if l[b] > 0 {
				empty = false
			}
		}
		if !empty {
			// One point a bucket, at its middle: each bucket holds a mean.
			var p strings.Builder
			x := func(b int) float64 { return marginL + math.Min((float64(b)+0.5)*bucketS/span, 1)*innerW }
			y := func(v float64) float64 { return y0 + h - math.Min(v/ymax, 1)*h }
			fmt.Fprintf(&p, "M%s,%s", num(marginL), num(y(base[0])))
			fmt.Fprintf(&p, " L%s,%s", num(marginL), num(y(top[0])))
			for b := 0; b < n; b++ {
				if b > 0 && b < n-1 && top[b] == top[b-1] && top[b] == top[b+1] {
					continue // a straight run needs only its ends
				}
				fmt.Fprintf(&p, " L%s,%s", num(x(b)), num(y(top[b])))
			}
			end := marginL + math.Min(float64(n)*bucketS/span, 1)*innerW
			fmt.Fprintf(&p, " L%s,%s L%s,%s", num(end), num(y(top[n-1])), num(end), num(y(base[n-1])))
			for b := n - 1; b >= 0; b-- {
				if b > 0 && b < n-1 && base[b] == base[b-1] && base[b] == base[b+1] {
					continue
				}
				fmt.Fprintf(&p, " L%s,%s", num(x(b)), num(y(base[b])))
			}
			s.f(`<path d="%s Z" fill="%s" stroke="none"/>`+"\n", p.String(), fills[i])
		}
		base = top
	}
}

func (s *svg) legend(y float64, names []string, fill func(i int) string, note string) {
	x := plotW - marginR + 12
	for i, name := range names {
		if i == maxLegend {
			s.f(`<text x="%s" y="%s">… %d more</text>`+"\n", num(x), num(y+float64(i)*16+10), len(names)-maxLegend)
			break
		}
		s.f(`<rect x="%s" y="%s" width="12" height="12" fill="%s"/><text x="%s" y="%s">%s</text>`+"\n",
			num(x), num(y+float64(i)*16), fill(i), num(x+18), num(y+float64(i)*16+10), html.EscapeString(name))
	}
	if note != "" {
		s.f(`<text x="%s" y="%s" font-size="11" fill="#555">%s</text>`+"\n", num(x), num(y+float64(min(len(names), maxLegend+1))*16+14), html.EscapeString(note))
	}
}

func mean(v []float64, bucketS float64, n int) []float64 {
	out := make([]float64, n)
	for b := 0; b < n && b < len(v); b++ {
		out[b] = v[b] / bucketS
	}
	return out
}

func shareNames(r *Report) []string {
	out := make([]string, len(r.Shares))
	for i, s := range r.Shares {
		out[i] = s.Share
		if len(r.Queues) > 1 {
			out[i] = s.Queue + "/" + s.Share
		}
	}
	return out
}

// CapacityPlot draws capacity over time: the top panel stacks what each
// share uses, solid within its own capacity and hatched where it borrows;
// the bottom panel stacks what each share lends.
func (r *Report) CapacityPlot(title string) []byte {
	var s svg
	h1, h2 := innerH, innerH*0.55
	total := marginT + h1 + 56 + h2 + marginB
	s.begin(total)
	s.f("<defs>")
	for i := range r.Shares {
		s.f(hatchPatternFormat, i, color(i), color(i))
	}
	s.f("</defs>\n")
	s.title("Capacity over time — " + title)
	n, bs, span := r.buckets()
	if n == 0 {
		return s.end()
	}
	var layers, lent [][]float64
	var fills, lentFills []string
	for i := range r.Shares {
		layers = append(layers, mean(r.Series.Own[i], bs, n), mean(r.Series.Borrowed[i], bs, n))
		fills = append(fills, color(i), fmt.Sprintf("url(#hatch%d)", i))
		lent = append(lent, mean(r.Series.Lent[i], bs, n))
		lentFills = append(lentFills, fmt.Sprintf("url(#hatch%d)", i))
	}
	ymax := r.Series.Capacity
	for b := 0; b < n; b++ {
		var t float64
		for _, l := range layers {
			t += l[b]
		}
		ymax = math.Max(ymax, t)
	}
	ymax = math.Max(ymax, 1)
	s.frame(marginT, h1, span, ymax, "instances in use", trimNum)
	s.stacked(marginT, h1, ymax, bs, span, layers, fills)
	y := marginT + h1 - r.Series.Capacity/ymax*h1
	s.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#000" stroke-dasharray="6,4"/><text x="%s" y="%s" text-anchor="end">capacity %s</text>`+"\n",
		num(marginL), num(y), num(marginL+innerW), num(y), num(marginL+innerW-4), num(y-4), trimNum(r.Series.Capacity))
	s.legend(marginT, shareNames(r), color, "hatched: borrowed")

	y2 := marginT + h1 + 56
	lmax := 1.0
	for b := 0; b < n; b++ {
		var t float64
		for _, l := range lent {
			t += l[b]
		}
		lmax = math.Max(lmax, t)
	}
	s.f(`<text x="%s" y="%s" font-size="13">Capacity lent to other shares</text>`+"\n", num(marginL), num(y2-8))
	s.frame(y2, h2, span, lmax, "instances lent", trimNum)
	s.stacked(y2, h2, lmax, bs, span, lent, lentFills)
	return s.end()
}

// WaitPlot draws each share's wait-time distribution as a cumulative curve
// on a logarithmic time axis.
func (r *Report) WaitPlot(title string) []byte {
	var s svg
	s.begin(plotH)
	s.title("Wait before first start — " + title)
	lo, hi := 1.0, 10.0
	for _, w := range r.Series.Waits {
		if len(w) > 0 {
			hi = math.Max(hi, w[len(w)-1])
		}
	}
	lhi := math.Ceil(math.Log10(hi))
	xOf := func(v float64) float64 {
		if v < lo {
			v = lo
		}
		return marginL + math.Log10(v)/lhi*innerW
	}
	s.f(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#999"/>`+"\n", num(marginL), num(marginT), num(innerW), num(innerH))
	for e := 0.0; e <= lhi; e++ {
		x := marginL + e/lhi*innerW
		s.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/><text x="%s" y="%s" text-anchor="middle">%s</text>`+"\n",
			num(x), num(marginT), num(x), num(marginT+innerH), num(x), num(marginT+innerH+16), dur(math.Pow(10, e)))
	}
	s.f(`<text x="%s" y="%s" text-anchor="middle">wait (log scale; waits under 1s drawn at 1s)</text>`+"\n", num(marginL+innerW/2), num(marginT+innerH+34))
	for p := 0; p <= 100; p += 25 {
		y := marginT + innerH - float64(p)/100*innerH
		s.f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#eee"/><text x="%s" y="%s" text-anchor="end">%d%%</text>`+"\n",
			num(marginL), num(y), num(marginL+innerW), num(y), num(marginL-6), num(y+4), p)
	}
	s.f(`<text transform="translate(16,%s) rotate(-90)" text-anchor="middle">jobs started within</text>`+"\n", num(marginT+innerH/2))
	for i, w := range r.Series.Waits {
		if len(w) == 0 {
			continue
		}
		var p strings.Builder
		// At most ~300 points a curve: every k-th value, and the last.
		k := max(1, len(w)/300)
		fmt.Fprintf(&p, "M%s,%s", num(xOf(w[0])), num(marginT+innerH))
		for j := 0; j < len(w); j += k {
			fmt.Fprintf(&p, " L%s,%s", num(xOf(w[j])), num(marginT+innerH-float64(j+1)/float64(len(w))*innerH))
		}
		fmt.Fprintf(&p, " L%s,%s", num(xOf(w[len(w)-1])), num(marginT))
		s.f(`<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", p.String(), color(i))
	}
	s.legend(marginT, shareNames(r), color, "")
	return s.end()
}

// PreemptionPlot draws preemptions over time, cross-share and in-share
// stacked.
func (r *Report) PreemptionPlot(title string) []byte {
	var s svg
	s.begin(plotH)
	s.title("Preemptions over time — " + title)
	n, bs, span := r.buckets()
	if n == 0 {
		return s.end()
	}
	ymax := 1.0
	for b := 0; b < n; b++ {
		ymax = math.Max(ymax, r.Series.Cross[b]+r.Series.InShare[b])
	}
	s.frame(marginT, innerH, span, ymax, fmt.Sprintf("preemptions per %s", dur(bs)), trimNum)
	s.stacked(marginT, innerH, ymax, bs, span, [][]float64{r.Series.Cross[:n], r.Series.InShare[:n]}, []string{"#e15759", "#f28e2b"})
	s.legend(marginT, []string{"cross-share", "in-share"}, func(i int) string { return []string{"#e15759", "#f28e2b"}[i] }, "")
	return s.end()
}

// HTML renders index.html: the headline figures, the table of shares and
// the three plots.
func (r *Report) HTML(title string) []byte {
	var b bytes.Buffer
	e := html.EscapeString
	fmt.Fprintf(&b, "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>qshare simulate — %s</title>\n", e(title))
	b.WriteString(`<style>body{font-family:sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:right}th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}img{max-width:100%;margin:1em 0}</style>` + "\n</head><body>\n")
	fmt.Fprintf(&b, "<h1>qshare simulate</h1>\n<p>%s</p>\n<ul>\n", e(title))
	fmt.Fprintf(&b, "<li>jobs: %d submitted, %d completed, %d failed, %d unfinished (%d never started)</li>\n", r.Jobs.Submitted, r.Jobs.Completed, r.Jobs.Failed, r.Jobs.Unfinished, r.Jobs.NeverStarted)
	fmt.Fprintf(&b, "<li>makespan %s; utilization %s</li>\n", dur(r.MakespanS), pct(r.Utilization))
	fmt.Fprintf(&b, "<li>wait before first start: mean %s, p50 %s, p95 %s, p99 %s</li>\n", dur(r.Wait.Mean), dur(r.Wait.P50), dur(r.Wait.P95), dur(r.Wait.P99))
	fmt.Fprintf(&b, "<li>preemptions: %d cross-share, %d in-share; work lost %s instance-hours</li>\n</ul>\n", r.Preemptions.CrossShare, r.Preemptions.InShare, trim(r.WorkLostInstS/3600))
	b.WriteString("<table>\n<tr><th>queue/share</th><th>strategy</th><th>own</th><th>jobs</th><th>completed</th><th>wait p50</th><th>p95</th><th>p99</th><th>preempted cross/in</th><th>used inst-h</th><th>borrowed</th><th>lent</th><th>idle</th><th>own utilization</th></tr>\n")
	for _, s := range r.Shares {
		fmt.Fprintf(&b, "<tr><td>%s/%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%d/%d</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
			e(s.Queue), e(s.Share), s.Strategy, s.OwnCapacity, s.Submitted, s.Completed, dur(s.Wait.P50), dur(s.Wait.P95), dur(s.Wait.P99),
			s.Preemptions.CrossShare, s.Preemptions.InShare, trim(s.UsedInstS/3600), trim(s.BorrowedInstS/3600), trim(s.LentInstS/3600),
			trim(s.IdleInstS/3600), pct(s.OwnUtilization))
	}
	b.WriteString("</table>\n")
	for _, p := range []string{"capacity.svg", "waits.svg", "preemptions.svg"} {
		fmt.Fprintf(&b, "<div><img src=\"%s\" alt=\"%s\"></div>\n", p, p)
	}
	b.WriteString("</body></html>\n")
	return b.Bytes()
}

// WritePlots writes capacity.svg, waits.svg, preemptions.svg and index.html
// into dir, creating it if needed.
func WritePlots(dir, title string, r *Report) error {
	if r.Series == nil {
		return fmt.Errorf("the report has no time series (it was not made by Run)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range map[string][]byte{
		"capacity.svg":    r.CapacityPlot(title),
		"waits.svg":       r.WaitPlot(title),
		"preemptions.svg": r.PreemptionPlot(title),
		"index.html":      r.HTML(title),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
