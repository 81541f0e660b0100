package shareview

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The cells of a bar. Brackets enclose what a share owns; borrowed
// capacity hangs outside them.
const (
	CellOwn      = "█"
	CellLent     = "▓"
	CellIdle     = "░"
	CellBorrowed = "▒"
)

// MaxBarCells is the widest a bar gets; beyond it one cell stands for more
// than one instance.
const MaxBarCells = 40

// Legend explains the cells of a bar.
const Legend = CellOwn + " in use  " + CellBorrowed + " borrowed  " + CellLent + " lent  " + CellIdle + " idle  [ ] owned"

// Render draws the views, one job queue after another, followed by the
// legend. The output depends on the views alone.
func Render(w io.Writer, views []View) error {
	var b strings.Builder
	if len(views) == 0 {
		b.WriteString("no job queue has quota shares: declare some with `qshare apply -f FILE`\n")
	}
	for i, v := range views {
		if i > 0 {
			b.WriteString("\n")
		}
		renderView(&b, v)
	}
	if len(views) > 0 {
		b.WriteString("\n" + Legend + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func renderView(b *strings.Builder, v View) {
	fmt.Fprintf(b, "job queue %s", v.Queue)
	if v.QueueState != "" && v.QueueState != "ENABLED" {
		fmt.Fprintf(b, " (%s)", v.QueueState)
	}
	fmt.Fprintf(b, " · service environment %s", v.Environment)
	if v.EnvironmentState != "" && v.EnvironmentState != "ENABLED" {
		fmt.Fprintf(b, " (%s)", v.EnvironmentState)
	}
	b.WriteString("\n")
	for _, t := range v.Capacity {
		fmt.Fprintf(b, "  %s: %d of %d in use", t.CapacityUnit, t.InUse, t.MaxCapacity)
		if t.Unowned > 0 {
			fmt.Fprintf(b, " (%d owned by no share)", t.Unowned)
		}
		b.WriteString("\n")
	}

	if v.FairShare {
		renderFair(b, v)
		return
	}
	// One cell per instance, unless the widest bar would be too wide.
	widest := int64(1)
	typeWidth := 0
	for _, s := range v.Shares {
		for _, c := range s.Capacity {
			widest = max(widest, c.Owned+c.Borrowed)
			typeWidth = max(typeWidth, len(c.CapacityUnit))
		}
	}
	scale := (widest + MaxBarCells - 1) / MaxBarCells
	if scale > 1 {
		fmt.Fprintf(b, "  (one cell is %d instances)\n", scale)
	}
	barWidth := 0
	bars := make([][]string, len(v.Shares))
	for i, s := range v.Shares {
		for _, c := range s.Capacity {
			bar := drawBar(c, scale)
			bars[i] = append(bars[i], bar)
			barWidth = max(barWidth, utf8.RuneCountInString(bar))
		}
	}

	for i, s := range v.Shares {
		b.WriteString("\n")
		fmt.Fprintf(b, "%s  %s", s.Name, s.Strategy)
		if s.BorrowLimit != nil {
			if *s.BorrowLimit < 0 {
				b.WriteString(", may borrow without limit")
			} else {
				fmt.Fprintf(b, ", may borrow %d%%", *s.BorrowLimit)
			}
		}
		fmt.Fprintf(b, ", in-share preemption %s", s.InSharePreemption)
		if s.State != "" && s.State != "ENABLED" {
			fmt.Fprintf(b, ", %s", s.State)
		}
		b.WriteString("\n")
		for k, c := range s.Capacity {
			bar := bars[i][k]
			pad := barWidth - utf8.RuneCountInString(bar)
			fmt.Fprintf(b, "  %-*s  %s%s  %s\n", typeWidth, c.CapacityUnit, bar, strings.Repeat(" ", pad), describe(c, s))
		}
		fmt.Fprintf(b, "  running: %s · waiting: %d\n", jobList(s.Active), s.Waiting)
		if s.Head != nil {
			fmt.Fprintf(b, "  next: %s (priority %d", s.Head.Name, s.Head.Priority)
			if s.Head.Preemptions > 0 {
				fmt.Fprintf(b, ", preempted %d×", s.Head.Preemptions)
			}
			b.WriteString(")")
			if s.Why != "" {
				fmt.Fprintf(b, " waits: %s", s.Why)
			}
			b.WriteString("\n")
		}
	}
}

// renderFair draws a fair-share queue's share identifiers: no bars (an
// identifier owns nothing), what its jobs use, and its head.
func renderFair(b *strings.Builder, v View) {
	b.WriteString("  fair share: the next job is the head of the identifier that has used least (decayed, weighted); no preemption\n")
	if len(v.Shares) == 0 {
		b.WriteString("\n  no share identifier has jobs\n")
	}
	for _, s := range v.Shares {
		b.WriteString("\n")
		fmt.Fprintf(b, "%s  %s\n", s.Name, s.Strategy)
		for _, c := range s.Capacity {
			fmt.Fprintf(b, "  %s  %d in use\n", c.CapacityUnit, c.InUse)
		}
		fmt.Fprintf(b, "  running: %s · waiting: %d\n", jobList(s.Active), s.Waiting)
		if s.Head != nil {
			fmt.Fprintf(b, "  next: %s (priority %d)", s.Head.Name, s.Head.Priority)
			if s.Why != "" {
				fmt.Fprintf(b, " waits: %s", s.Why)
			}
			b.WriteString("\n")
		}
	}
}

// drawBar draws one share's capacity of one type: own use, lent and idle
// inside brackets, borrowed outside.
func drawBar(c ShareCapacity, scale int64) string {
	cells := func(n int64, cell string) string {
		if n <= 0 {
			return ""
		}
		return strings.Repeat(cell, int((n+scale-1)/scale))
	}
	var b strings.Builder
	if c.Owned > 0 {
		b.WriteString("[")
		b.WriteString(cells(c.Own, CellOwn))
		b.WriteString(cells(c.Lent, CellLent))
		b.WriteString(cells(c.Idle, CellIdle))
		b.WriteString("]")
	}
	b.WriteString(cells(c.Borrowed, CellBorrowed))
	return b.String()
}

// describe says in words what the bar shows.
func describe(c ShareCapacity, s ShareView) string {
	var parts []string
	if c.Own > 0 || (c.Owned > 0 && c.Lent == 0 && c.Idle == 0) {
		parts = append(parts, fmt.Sprintf("%d in use", c.Own))
	}
	if c.Borrowed > 0 {
		parts = append(parts, fmt.Sprintf("%d borrowed from %s", c.Borrowed, flows(c.BorrowedFrom)))
	}
	if c.Lent > 0 {
		parts = append(parts, fmt.Sprintf("%d lent to %s", c.Lent, flows(c.LentTo)))
	}
	if c.Idle > 0 {
		kind := "lendable"
		if !s.Strategy.Lends() {
			kind = "reserved"
		}
		parts = append(parts, fmt.Sprintf("%d idle, %s", c.Idle, kind))
	}
	if c.Owned == 0 {
		parts = append(parts, "owns none")
	}
	return strings.Join(parts, " · ")
}

func flows(fs []Flow) string {
	name := func(f Flow) string {
		if f.QuotaShare == Unowned {
			return "capacity no share owns"
		}
		return f.QuotaShare
	}
	if len(fs) == 1 {
		return name(fs[0])
	}
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s (%d)", name(f), f.Quantity))
	}
	return join(out)
}

func jobList(js []Job) string {
	if len(js) == 0 {
		return "none"
	}
	var out []string
	for _, j := range js {
		out = append(out, fmt.Sprintf("%s (p%d)", j.Name, j.Priority))
	}
	return strings.Join(out, ", ")
}
