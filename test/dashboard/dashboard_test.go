// Package dashboard_test drives qshare's dashboard (package web) in a real
// headless Chromium, as a person would use it, against a real
// `qshare serve --executor simulated`: it plays the spec's worked example
// (§6.10) with the qshare commands and, after each step, reads the rendered
// page (the DOM after the scripts ran) and checks it against what
// `qshare shares` and `qshare describe` say. With -screenshots it saves a
// picture of each view to docs/dashboard/.
//
// Without Chromium (/usr/bin/chromium, or chromium on the PATH) the tests
// skip and say so; .ci/run installs it.
package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"qshare/internal/clitest"
	"qshare/internal/longtest"
	"qshare/internal/serveproc"
)

var screenshots = flag.Bool("screenshots", false, "save a screenshot of each view to docs/dashboard/")

// bin is the qshare binary under test; root is the repository root;
// chromium is the browser, "" when absent.
var bin, root, chromium string

func TestMain(m *testing.M) {
	flag.Parse()
	for _, c := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(c); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		fmt.Println("test/dashboard: Chromium is not installed (no /usr/bin/chromium, no chromium on the PATH): the browser tests are skipped. Install it with apt-get install -y chromium (.ci/run does).")
		os.Exit(m.Run())
	}
	root, _ = filepath.Abs("../..")
	// Each test has a server, a window of the one Chromium (browser) and
	// a directory of its own, and mostly waits: on the page's refresh
	// every 2 s and on the simulated jobs. One at a time they took over
	// two minutes on a loaded 2-core machine for 24 s of CPU; they run
	// side by side, all six at once.
	longtest.MinParallel(6)
	os.Exit(serveproc.WithBinary("qshare-dashboard-", &bin, func() int {
		defer closeBrowser()
		return m.Run()
	}))
}

// The one Chromium of the test binary, started by the first test that
// needs it and stopped at the end: each test opens a browser context of
// its own in it (an incognito window: no cookies, storage or cache
// shared with the others). A Chromium per test cost each test about a
// second of CPU to start and as much again to stop.
var (
	browserOnce   sync.Once
	browserCtx    context.Context
	browserErr    error
	closeBrowsers []func()
)

// browser returns the context of the test binary's Chromium, starting it
// on the first call.
func browser() (context.Context, error) {
	browserOnce.Do(func() {
		dir, err := os.MkdirTemp("", "qshare-dashboard-chromium-")
		if err != nil {
			browserErr = err
			return
		}
		opts := []chromedp.ExecAllocatorOption{
			chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
			chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(filepath.Join(dir, "profile")), chromedp.WindowSize(1200, 800),
			chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
			// Several tests' windows at once: none is slowed as a
			// background one (the page refreshes on a timer).
			chromedp.Flag("disable-background-timer-throttling", true), chromedp.Flag("disable-backgrounding-occluded-windows", true),
			chromedp.Flag("disable-renderer-backgrounding", true),
			// Chromium keeps its singleton socket in a directory of its own
			// under $TMPDIR and leaves it there; this keeps it inside dir.
			chromedp.Env("TMPDIR=" + dir),
		}
		actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, bcancel := chromedp.NewContext(actx)
		closeBrowsers = []func(){bcancel, acancel, func() { os.RemoveAll(dir) }}
		if err := chromedp.Do(bctx); err != nil {
			browserErr = fmt.Errorf("starting Chromium (%s): %w", chromium, err)
			return
		}
		browserCtx = bctx
	})
	return browserCtx, browserErr
}

// closeBrowser stops the test binary's Chromium, if it started.
func closeBrowser() {
	for _, f := range closeBrowsers {
		f()
	}
}

func needChromium(t testing.TB) {
	t.Helper()
	if chromium == "" {
		t.Skip("Chromium is not installed (no /usr/bin/chromium): install it with apt-get install -y chromium to run the dashboard's browser tests")
	}
}

// moreViews skips t unless the long scenarios run (.ci/run's long step),
// after needChromium: the README's command keeps one window of this
// suite, TestWorkedExample, which reads every view through the spec's
// worked example; what describes what t adds to it.
func moreViews(t *testing.T, what string) {
	t.Helper()
	needChromium(t)
	longtest.Only(t, what+"; in the README's command TestWorkedExample reads every view of the dashboard in Chromium through the spec's worked example")
}

// env is one test's server, browser and working directory, and the qshare
// commands run against the server (clitest.Env's OK, JSONOf, Submit and
// Await).
type env struct {
	*clitest.Env
	t   testing.TB
	ctx context.Context // the browser tab's
}

func newEnv(t *testing.T, args ...string) *env {
	t.Helper()
	return newEnvTB(t, args...)
}

// newEnvTB is newEnv for a test or a benchmark.
func newEnvTB(t testing.TB, args ...string) *env {
	t.Helper()
	needChromium(t)
	ce := clitest.New(t, bin, root, args...)
	bctx, err := browser()
	if err != nil {
		t.Fatal(err)
	}
	tctx, tcancel := chromedp.NewContext(bctx, chromedp.WithNewBrowserContext())
	if err := chromedp.Do(tctx, chromedp.EmulateViewport(1200, 800)); err != nil {
		tcancel()
		t.Fatalf("opening a window of Chromium (%s): %v", chromium, err)
	}
	t.Cleanup(tcancel)
	return &env{Env: ce, t: t, ctx: tctx}
}

// job is the part of `qshare describe -o json` the tests read.
type job struct {
	JobID             string `json:"jobId"`
	JobName           string `json:"jobName"`
	Status            string `json:"status"`
	StatusReason      string `json:"statusReason"`
	PreemptionSummary *struct {
		PreemptedAttemptCount   int `json:"preemptedAttemptCount"`
		RecentPreemptedAttempts []struct {
			StatusReason string `json:"statusReason"`
		} `json:"recentPreemptedAttempts"`
	} `json:"preemptionSummary"`
}

func (e *env) describe(name string) job {
	e.t.Helper()
	var j job
	e.JSONOf(&j, "describe", name)
	return j
}

// await waits until each named job has the status given and every job in
// heads has been given a wait reason by the scheduler.
func (e *env) await(want map[string]string, heads ...string) {
	e.t.Helper()
	e.Await(want, func() bool {
		for _, h := range heads {
			if !strings.HasPrefix(e.describe(h).StatusReason, "waiting for capacity:") {
				return false
			}
		}
		return true
	})
}

// open shows a view of the dashboard (a hash route such as "shares").
func (e *env) open(route string) {
	e.t.Helper()
	var err error
	if cur, lerr := chromedp.Run(e.ctx, chromedp.Location()); lerr == nil && strings.HasPrefix(cur, e.Srv.Endpoint+"/ui/") {
		err = chromedp.Do(e.ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf("location.hash = %q", "#"+route)))
	} else {
		err = chromedp.Do(e.ctx, chromedp.Navigate(e.Srv.Endpoint+"/ui/#"+route))
	}
	if err != nil {
		e.t.Fatalf("open #%s: %v", route, err)
	}
}

// waitFor evaluates the JavaScript expression js in the page until it
// returns true: the page refreshes itself every 2 s, so what a step changed
// shows up within a few refreshes. On a timeout it fails with the page's
// text and the value of show.
func (e *env) waitFor(what, js, show string) {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, err := chromedp.Run(e.ctx, chromedp.Evaluate[bool]("(() => { try { return !!("+js+"); } catch (e) { return false; } })()"))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			text, _ := chromedp.Run(e.ctx, chromedp.Evaluate[string]("document.body.innerText"))
			var shown string
			if show != "" {
				shown, _ = chromedp.Run(e.ctx, chromedp.Evaluate[string]("JSON.stringify("+show+")"))
			}
			e.t.Fatalf("the dashboard did not show %s within 20s (err %v)\n%s\npage:\n%s", what, err, shown, text)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eval returns the value of a JavaScript expression in the page.
func (e *env) eval(js string, v any) {
	e.t.Helper()
	raw, err := chromedp.Run(e.ctx, chromedp.Evaluate[[]byte](js))
	if err != nil {
		e.t.Fatalf("evaluate %s: %v", js, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		e.t.Fatalf("evaluate %s: %v", js, err)
	}
}

// shot saves a screenshot of the page as name.png: to docs/dashboard/ with
// -screenshots, else to the test's directory, so that taking it is tested.
func (e *env) shot(name string) {
	e.t.Helper()
	png, err := chromedp.Run(e.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		e.t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		e.t.Fatalf("screenshot %s is not a PNG", name)
	}
	dir := e.Dir
	if *screenshots {
		dir = filepath.Join(root, "docs", "dashboard")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// shareRow is one bar of the Shares view, as the DOM shows it.
type shareRow struct {
	Queue, Share, Type, Strategy               string
	Owned, Own, Borrowed, Lent, Idle, Reserved int64
	BorrowedFrom, LentTo, Desc                 string
}

const readShareRows = `[...document.querySelectorAll("tr.share-row")].map(r => ({
  Queue: r.dataset.queue, Share: r.dataset.share, Type: r.dataset.type, Strategy: r.dataset.strategy,
  Owned: +r.dataset.owned, Own: +r.dataset.own, Borrowed: +r.dataset.borrowed, Lent: +r.dataset.lent,
  Idle: +r.dataset.idle, Reserved: +r.dataset.reserved, BorrowedFrom: r.dataset.borrowedFrom, LentTo: r.dataset.lentTo,
  Desc: r.querySelector("td.desc").textContent,
  Segs: [...r.querySelectorAll(".seg")].map(s => s.dataset.seg + "=" + s.dataset.n).join(",")}))`

// cliShares is the part of `qshare shares -o json` the comparison reads.
type cliShares []struct {
	JobQueue    string `json:"jobQueue"`
	QuotaShares []struct {
		QuotaShareName string `json:"quotaShareName"`
		Strategy       string `json:"strategy"`
		Capacity       []struct {
			CapacityUnit                     string `json:"capacityUnit"`
			Owned, Own, Borrowed, Lent, Idle int64
			BorrowedFrom, LentTo             []flow
		} `json:"capacity"`
	} `json:"quotaShares"`
}

type flow struct {
	QuotaShare string `json:"quotaShare"`
	Quantity   int64  `json:"quantity"`
}

func flows(fs []flow) string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s=%d", f.QuotaShare, f.Quantity))
	}
	return strings.Join(out, ",")
}

// checkSharesMatchCLI waits until the Shares view shows exactly what
// `qshare shares -o json` says, bar for bar, and that each bar's words are
// the words `qshare shares` prints for it.
func (e *env) checkSharesMatchCLI() []shareRow {
	e.t.Helper()
	var cli cliShares
	e.JSONOf(&cli, "shares")
	text := e.OK("shares")
	var want []shareRow
	for _, q := range cli {
		for _, s := range q.QuotaShares {
			for _, c := range s.Capacity {
				r := shareRow{Queue: q.JobQueue, Share: s.QuotaShareName, Type: c.CapacityUnit, Strategy: s.Strategy, Owned: c.Owned,
					Own: c.Own, Borrowed: c.Borrowed, Lent: c.Lent, Idle: c.Idle, BorrowedFrom: flows(c.BorrowedFrom), LentTo: flows(c.LentTo)}
				if s.Strategy == "RESERVE" {
					r.Idle, r.Reserved = 0, c.Idle
				}
				want = append(want, r)
			}
		}
	}
	e.open("shares")
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got []shareRow
		e.eval(readShareRows, &got)
		same := len(got) == len(want)
		for i := 0; same && i < len(got); i++ {
			g := got[i]
			g.Desc = ""
			same = g == want[i]
		}
		if same {
			for _, g := range got {
				if !strings.Contains(text, g.Type+"  ") || !strings.Contains(text, "  "+g.Desc+"\n") {
					e.t.Errorf("share %s: the dashboard says %q, which qshare shares does not print:\n%s", g.Share, g.Desc, text)
				}
			}
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the Shares view does not match qshare shares -o json within 20s\n got: %+v\nwant: %+v", got, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func rowOf(t *testing.T, rows []shareRow, share string) shareRow {
	t.Helper()
	for _, r := range rows {
		if r.Share == share {
			return r
		}
	}
	t.Fatalf("no bar for share %s in %+v", share, rows)
	return shareRow{}
}

// TestWorkedExample plays the spec's worked example (§6.10) and reads each
// view after each step.
func TestWorkedExample(t *testing.T) {
	t.Parallel() // a server and a Chromium of its own (TestMain)
	e := newEnv(t, "--events", filepath.Join(t.TempDir(), "events.jsonl"))
	e.OK("apply", "-f", "examples/three-shares.yaml")

	// Step 1: QS1 borrows QS2's idle instance; qs1-low waits, since QS3
	// reserves its own.
	e.Submit("QS1", "qs1-high", 3)
	e.Submit("QS1", "qs1-med", 2)
	e.Submit("QS1", "qs1-low", 1)
	e.await(map[string]string{"qs1-high": "RUNNING", "qs1-med": "RUNNING", "qs1-low": "RUNNABLE"}, "qs1-low")
	rows := e.checkSharesMatchCLI()
	if r := rowOf(t, rows, "QS1"); r.Own != 1 || r.Borrowed != 1 || r.BorrowedFrom != "QS2=1" || r.Desc != "1 in use · 1 borrowed from QS2" {
		t.Errorf("step 1: QS1's bar is %+v, want 1 own and 1 borrowed from QS2", r)
	}
	if r := rowOf(t, rows, "QS2"); r.Lent != 1 || r.LentTo != "QS1=1" {
		t.Errorf("step 1: QS2's bar is %+v, want 1 lent to QS1", r)
	}
	if r := rowOf(t, rows, "QS3"); r.Reserved != 1 || r.Idle != 0 || r.Desc != "1 idle, reserved" {
		t.Errorf("step 1: QS3's bar is %+v, want its idle instance reserved", r)
	}
	var segs string
	e.eval(`[...document.querySelectorAll('tr.share-row[data-share="QS3"] .seg')].map(s => s.dataset.seg + ":" + getComputedStyle(s).backgroundColor).join()`, &segs)
	var colours string
	e.eval(`[...document.querySelectorAll('.legend span')].map(s => s.dataset.legend + ":" + getComputedStyle(s, "::before").backgroundColor).join()`, &colours)
	if !strings.HasPrefix(segs, "reserved:") || !strings.Contains(colours, segs) {
		t.Errorf("step 1: QS3's bar %q is not drawn in the legend's colour for reserved capacity (%s)", segs, colours)
	}
	e.shot("shares-step1")

	// The Queue view: qs1-low at the front, with the scheduler's reason.
	low := e.describe("qs1-low")
	e.open("queue")
	e.waitFor("qs1-low at position 1 with its reason",
		fmt.Sprintf(`document.querySelector('table.front tr[data-job-name="qs1-low"][data-position="1"] td.reason').textContent === %q &&
		 document.querySelector('table.share-fronts tr[data-share="QS1"][data-job-name="qs1-low"] td.reason').textContent === %q`, low.StatusReason, low.StatusReason),
		`document.querySelector("main").innerText`)
	if !strings.Contains(low.StatusReason, "QS3") {
		t.Errorf("step 1: qs1-low's reason %q does not say that QS3 reserves its instance", low.StatusReason)
	}
	e.shot("queue-step1")

	// Step 2: QS2 takes its instance back; qs1-med is preempted.
	e.Submit("QS2", "qs2-job-1", 1)
	e.await(map[string]string{"qs1-high": "RUNNING", "qs1-med": "RUNNABLE", "qs1-low": "RUNNABLE", "qs2-job-1": "RUNNING"}, "qs1-med")
	rows = e.checkSharesMatchCLI()
	if r := rowOf(t, rows, "QS1"); r.Own != 1 || r.Borrowed != 0 {
		t.Errorf("step 2: QS1's bar is %+v, want 1 own and nothing borrowed", r)
	}
	if r := rowOf(t, rows, "QS3"); r.Reserved != 1 {
		t.Errorf("step 2: QS3's bar is %+v, want its idle instance reserved", r)
	}
	e.shot("shares-step2")
	med := e.describe("qs1-med")
	if med.PreemptionSummary == nil || len(med.PreemptionSummary.RecentPreemptedAttempts) != 1 {
		t.Fatalf("step 2: qs1-med was not preempted once: %+v", med)
	}
	why := med.PreemptionSummary.RecentPreemptedAttempts[0].StatusReason
	if !strings.Contains(why, "qs2-job-1") && !strings.Contains(why, "QS2") {
		t.Errorf("step 2: the preemption's reason %q names neither the job nor the share it made room for", why)
	}
	e.open("job/" + med.JobID)
	e.waitFor("qs1-med's preemption with its reason",
		fmt.Sprintf(`document.querySelector('#job[data-job-name="qs1-med"]') &&
		 document.querySelectorAll('[data-preemption]').length === 1 &&
		 document.querySelector('[data-preemption] .reason').textContent === %q &&
		 document.querySelector('[data-preemption] [data-preempted-for="qs2-job-1"]') &&
		 document.querySelector('[data-field="preempted"]').textContent === "1 time" &&
		 document.querySelector('[data-field="status reason"]').textContent === %q`, why, e.describe("qs1-med").StatusReason),
		`document.querySelector("main").innerText`)
	e.waitFor("the job's log or why it has none", `document.querySelector("#log").textContent.length > 0`, "")
	e.shot("job-step2")

	// Step 3: qs1-low's priority rises to 4 and it preempts qs1-high on
	// QS1's own instance: the in-share swap.
	e.OK("priority", "qs1-low", "4")
	e.await(map[string]string{"qs1-high": "RUNNABLE", "qs1-med": "RUNNABLE", "qs1-low": "RUNNING", "qs2-job-1": "RUNNING"}, "qs1-high")
	rows = e.checkSharesMatchCLI()
	if r := rowOf(t, rows, "QS1"); r.Own != 1 || r.Borrowed != 0 {
		t.Errorf("step 3: QS1's bar is %+v, want 1 own", r)
	}
	high := e.describe("qs1-high")
	if high.PreemptionSummary == nil || len(high.PreemptionSummary.RecentPreemptedAttempts) != 1 {
		t.Fatalf("step 3: qs1-high was not preempted once: %+v", high)
	}
	swap := high.PreemptionSummary.RecentPreemptedAttempts[0].StatusReason
	e.open("job/" + high.JobID)
	e.waitFor("qs1-high's in-share preemption", fmt.Sprintf(`document.querySelector('#job[data-job-name="qs1-high"]') &&
		 document.querySelector('[data-preemption] .reason').textContent === %q &&
		 document.querySelector('[data-preemption] [data-preempted-for="qs1-low"]')`, swap), `document.querySelector("main").innerText`)
	if !strings.Contains(strings.ToLower(swap), "in-share") {
		t.Errorf("step 3: the preemption's reason %q does not say it was in-share", swap)
	}
	e.shot("job-step3")
	rows = e.checkSharesMatchCLI()
	if r := rowOf(t, rows, "QS3"); r.Reserved != 1 || r.Desc != "1 idle, reserved" {
		t.Errorf("step 3: QS3's bar is %+v, want its idle instance reserved", r)
	}
	// The queue now considers qs1-high (priority 3) before qs1-med (2).
	e.open("queue")
	e.waitFor("qs1-high before qs1-med in QS1", `(() => { const n = [...document.querySelectorAll('table.front tr[data-share="QS1"]')].map(r => r.dataset.jobName);
		return n.indexOf("qs1-high") >= 0 && n.indexOf("qs1-high") < n.indexOf("qs1-med"); })()`, `document.querySelector("main").innerText`)
	e.shot("queue-step3")
	// The timeline: qs1-low started after qs1-high was preempted for it.
	e.open("events")
	e.waitFor("the swap in the timeline", fmt.Sprintf(`document.querySelector('tr[data-event="preempt"][data-job=%q]') &&
		 document.querySelector('tr[data-event="start"][data-job=%q]') &&
		 document.querySelectorAll('tr[data-event="preempt"]').length === 2 &&
		 document.querySelectorAll('#timeline .tick').length >= 6`, high.JobID, e.describe("qs1-low").JobID),
		`document.querySelector("main").innerText`)
	var forWho string
	e.eval(fmt.Sprintf(`document.querySelector('tr[data-event="preempt"][data-job=%q] td.reason').textContent`, high.JobID), &forWho)
	if !strings.HasPrefix(forWho, "preempted for qs1-low: ") || !strings.Contains(forWho, "in-share") {
		t.Errorf("step 3: the timeline says %q of qs1-high's preemption, not that it made room for qs1-low", forWho)
	}
	e.shot("events-step3")

	// The Jobs view, filtered by share, status and name, as a person would.
	e.open("jobs")
	e.waitFor("the four jobs", `document.querySelectorAll("table.jobs tbody tr").length === 4`, `document.querySelector("main").innerText`)
	if err := chromedp.Do(e.ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("filter-share").value = "QS1"; document.getElementById("filter-share").dispatchEvent(new Event("change"))`)); err != nil {
		t.Fatal(err)
	}
	e.waitFor("QS1's three jobs", `document.querySelectorAll("table.jobs tbody tr").length === 3 && !document.querySelector('table.jobs tr[data-share="QS2"]')`, `document.querySelector("main").innerText`)
	if err := chromedp.Do(e.ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("filter-status").value = "RUNNABLE"; document.getElementById("filter-status").dispatchEvent(new Event("change"))`)); err != nil {
		t.Fatal(err)
	}
	e.waitFor("QS1's two RUNNABLE jobs", `[...document.querySelectorAll("table.jobs tbody tr")].map(r => r.dataset.jobName).sort().join() === "qs1-high,qs1-med"`, `document.querySelector("main").innerText`)
	if err := chromedp.Do(e.ctx, chromedp.SendKeys(chromedp.ID("filter-name"), "hig")); err != nil {
		t.Fatal(err)
	}
	e.waitFor("qs1-high alone", `[...document.querySelectorAll("table.jobs tbody tr")].map(r => r.dataset.jobName).join() === "qs1-high"`, `document.querySelector("main").innerText`)
	// The filter survives the page's own refreshes.
	var before int
	e.eval(`+document.body.dataset.renders`, &before)
	e.waitFor("two more refreshes", fmt.Sprintf(`+document.body.dataset.renders >= %d`, before+2), "")
	e.waitFor("qs1-high alone after refreshes", `document.getElementById("filter-name").value === "hig" && [...document.querySelectorAll("table.jobs tbody tr")].map(r => r.dataset.jobName).join() === "qs1-high"`, "")
	if err := chromedp.Do(e.ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("filter-name").value = ""; document.getElementById("filter-name").dispatchEvent(new Event("input"))`),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("filter-status").value = ""; document.getElementById("filter-status").dispatchEvent(new Event("change"))`)); err != nil {
		t.Fatal(err)
	}
	e.waitFor("QS1's three jobs again", `document.querySelectorAll("table.jobs tbody tr").length === 3`, "")
	e.shot("jobs-step3")
}

// TestNoEventLog: without --events the Events view says there is no
// timeline and how to get one, and the other views still work.
func TestNoEventLog(t *testing.T) {
	t.Parallel() // a server and a Chromium of its own (TestMain)
	moreViews(t, "the Events view without --events")
	e := newEnv(t)
	e.OK("apply", "-f", "examples/three-shares.yaml")
	e.open("events")
	e.waitFor("that there is no event log", `document.getElementById("events-off").textContent.includes("--events FILE")`, `document.querySelector("main").innerText`)
	e.open("queue")
	e.waitFor("an empty queue", `document.querySelector('[data-empty-queue="training"]')`, `document.querySelector("main").innerText`)
	e.open("shares")
	e.waitFor("three bars", `document.querySelectorAll("tr.share-row").length === 3`, "")
	// The page calls its own origin, whichever name it was opened by: the
	// request guard lets both through (same-origin), so none failed.
	local := strings.Replace(e.Srv.Endpoint, "127.0.0.1", "localhost", 1)
	if err := chromedp.Do(e.ctx, chromedp.Navigate(local+"/ui/#shares")); err != nil {
		t.Fatal(err)
	}
	e.waitFor("three bars at localhost", `location.hostname === "localhost" && document.querySelectorAll("tr.share-row").length === 3`, "")
	var status string
	e.eval(`document.getElementById("status").className + ":" + document.getElementById("status").textContent`, &status)
	if !strings.HasPrefix(status, ":updated") {
		t.Errorf("the status line says %q, want a successful update", status)
	}
}

// TestFairShareQueue: the Shares view shows a fair-share queue too: its
// share identifiers with running jobs and what each holds, from the
// queue's snapshot (the lending endpoint knows quota shares only).
func TestFairShareQueue(t *testing.T) {
	t.Parallel() // a server and a Chromium of its own (TestMain)
	moreViews(t, "the fair-share queue's view")
	e := newEnv(t)
	e.OK("apply", "-f", "examples/fair-share.yaml")
	for _, j := range []struct{ name, ident string }{{"a1", "teamA"}, {"a2", "teamA"}, {"b1", "teamB"}} {
		e.OK("submit", "--queue", "shared", "--share-identifier", j.ident, "--instance-type", "ml.g5.xlarge", "--name", j.name, "--env", "QSHARE_SIM_DURATION=1h")
	}
	e.open("shares")
	e.waitFor("the fair-share queue's identifiers",
		`document.querySelector('tr.fair-row[data-queue="shared"][data-identifier="teamA"]') &&
		 document.querySelector('tr.fair-row[data-identifier="teamA"] td:nth-child(2)').textContent === "2 ml.g5.xlarge" &&
		 document.querySelector('tr.fair-row[data-identifier="teamB"] td:nth-child(2)').textContent === "1 ml.g5.xlarge"`,
		`document.querySelector("main").innerText`)
}

// TestEnvironmentExecutors: on a server with two named executors, the
// Shares view names each environment's executor and whether its service
// answers. The second is a container executor whose engine socket does
// not exist: its sweep at start finds the engine silent, so its
// environment shows it down with the reason, and the other up.
func TestEnvironmentExecutors(t *testing.T) {
	t.Parallel() // a server and a Chromium of its own (TestMain)
	moreViews(t, "the environment's executors view")
	dir := t.TempDir()
	file := filepath.Join(dir, "executors.yaml")
	conf := "default: {kind: simulated}\nbox: {kind: container, containerHost: \"unix://" + filepath.Join(dir, "no-engine.sock") + "\"}\n"
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "--executors", file)
	e.OK("apply", "-f", "examples/three-shares.yaml")
	apply := filepath.Join(dir, "box.yaml")
	if err := os.WriteFile(apply, []byte(`serviceEnvironments:
  - serviceEnvironmentName: box-pool
    executor: box
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
jobQueues:
  - jobQueueName: on-box
    priority: 1
    schedulingPolicy: qm
    serviceEnvironment: box-pool
    quotaShares:
      - quotaShareName: B
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: RESERVE}
        preemptionConfiguration: {inSharePreemption: DISABLED}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.OK("apply", "-f", apply)
	e.open("shares")
	e.waitFor("each environment's executor, box down and default up",
		`document.querySelector('.envexec[data-env="gpu-pool"][data-executor="default"][data-health="up"]') &&
		 document.querySelector('.envexec[data-env="box-pool"][data-executor="box"][data-health="down"]').textContent.includes("the container engine does not answer")`,
		`Array.from(document.querySelectorAll(".envexec"), x => x.dataset.env + " " + x.dataset.executor + " " + x.dataset.health + ": " + x.textContent)`)
	e.shot("environment-executors")
}
