package sim

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Comparison sets a base run beside a what-if run of the same trace.
type Comparison struct {
	// Changes lists what the what-if run changed in the configuration.
	Changes []string     `json:"changes"`
	Base    *Report      `json:"base"`
	WhatIf  *Report      `json:"what_if"`
	Shares  []ShareDelta `json:"shares"`
}

// ShareDelta is how one share fared in the what-if run compared with the
// base: what-if minus base.
type ShareDelta struct {
	Queue            string  `json:"queue"`
	Share            string  `json:"share"`
	WaitMeanS        float64 `json:"wait_mean_s"`
	WaitP50S         float64 `json:"wait_p50_s"`
	WaitP95S         float64 `json:"wait_p95_s"`
	WaitP99S         float64 `json:"wait_p99_s"`
	Completed        int     `json:"completed"`
	PreemptionsCross int     `json:"preemptions_cross_share"`
	PreemptionsIn    int     `json:"preemptions_in_share"`
	BorrowedInstS    float64 `json:"borrowed_instance_s"`
	LentInstS        float64 `json:"lent_instance_s"`
	IdleInstS        float64 `json:"idle_instance_s"`
	OwnUtilization   float64 `json:"own_utilization"`
}

// Compare builds the comparison of two reports of the same trace. Shares
// are matched by queue and name; a share in only one run is left out.
func Compare(changes []string, base, whatIf *Report) *Comparison {
	c := &Comparison{Changes: changes, Base: base, WhatIf: whatIf}
	if c.Changes == nil {
		c.Changes = []string{}
	}
	idx := map[string]ShareReport{}
	for _, s := range base.Shares {
		idx[s.Queue+"/"+s.Share] = s
	}
	for _, w := range whatIf.Shares {
		b, ok := idx[w.Queue+"/"+w.Share]
		if !ok {
			continue
		}
		c.Shares = append(c.Shares, ShareDelta{
			Queue: w.Queue, Share: w.Share,
			WaitMeanS: round(w.Wait.Mean - b.Wait.Mean), WaitP50S: round(w.Wait.P50 - b.Wait.P50),
			WaitP95S: round(w.Wait.P95 - b.Wait.P95), WaitP99S: round(w.Wait.P99 - b.Wait.P99),
			Completed:        w.Completed - b.Completed,
			PreemptionsCross: w.Preemptions.CrossShare - b.Preemptions.CrossShare,
			PreemptionsIn:    w.Preemptions.InShare - b.Preemptions.InShare,
			BorrowedInstS:    round(w.BorrowedInstS - b.BorrowedInstS),
			LentInstS:        round(w.LentInstS - b.LentInstS),
			IdleInstS:        round(w.IdleInstS - b.IdleInstS),
			OwnUtilization:   round(w.OwnUtilization - b.OwnUtilization),
		})
	}
	return c
}

// WriteJSON writes the comparison as indented JSON.
func (c *Comparison) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteSummary writes the changes, the headline figures side by side, and
// a table of each share's figures, base -> what-if.
func (c *Comparison) WriteSummary(w io.Writer) error {
	var b strings.Builder
	b.WriteString("what if:\n")
	if len(c.Changes) == 0 {
		b.WriteString("  (no change)\n")
	}
	for _, ch := range c.Changes {
		b.WriteString("  " + ch + "\n")
	}
	x, y := c.Base, c.WhatIf
	fmt.Fprintf(&b, "\n%-22s %14s %14s\n", "", "base", "what-if")
	row := func(name, a, z string) { fmt.Fprintf(&b, "%-22s %14s %14s\n", name, a, z) }
	row("completed", fmt.Sprint(x.Jobs.Completed), fmt.Sprint(y.Jobs.Completed))
	row("unfinished", fmt.Sprint(x.Jobs.Unfinished), fmt.Sprint(y.Jobs.Unfinished))
	row("makespan", dur(x.MakespanS), dur(y.MakespanS))
	row("utilization", pct(x.Utilization), pct(y.Utilization))
	row("wait p50", dur(x.Wait.P50), dur(y.Wait.P50))
	row("wait p95", dur(x.Wait.P95), dur(y.Wait.P95))
	row("preemptions cross", fmt.Sprint(x.Preemptions.CrossShare), fmt.Sprint(y.Preemptions.CrossShare))
	row("preemptions in-share", fmt.Sprint(x.Preemptions.InShare), fmt.Sprint(y.Preemptions.InShare))
	row("work lost inst-h", trim(x.WorkLostInstS/3600), trim(y.WorkLostInstS/3600))
	b.WriteString("\n")
	base := map[string]ShareReport{}
	for _, s := range x.Shares {
		base[s.Queue+"/"+s.Share] = s
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "queue/share\twait p50\twait p95\tpreempt x/in\tborrowed inst-h\tlent inst-h\town util\t")
	arrow := func(a, z string) string {
		if a == z {
			return a
		}
		return a + " -> " + z
	}
	for _, s := range y.Shares {
		o, ok := base[s.Queue+"/"+s.Share]
		if !ok {
			continue
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Queue, s.Share,
			arrow(dur(o.Wait.P50), dur(s.Wait.P50)), arrow(dur(o.Wait.P95), dur(s.Wait.P95)),
			arrow(fmt.Sprintf("%d/%d", o.Preemptions.CrossShare, o.Preemptions.InShare), fmt.Sprintf("%d/%d", s.Preemptions.CrossShare, s.Preemptions.InShare)),
			arrow(trim(o.BorrowedInstS/3600), trim(s.BorrowedInstS/3600)), arrow(trim(o.LentInstS/3600), trim(s.LentInstS/3600)),
			arrow(pct(o.OwnUtilization), pct(s.OwnUtilization)))
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}
