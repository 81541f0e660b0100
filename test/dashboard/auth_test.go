package dashboard_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/chromedp/chromedp"
)

// The principals of TestSignedIn: admin may do anything; alice may read
// the queue and her own share QS1, its jobs and their logs, and the
// timeline, but not list every job nor read QS2 and QS3.
const (
	adminKey, adminSecret = "AKIAQSHAREADMIN00001", "admin-secret-admin-secret-admin-secret-12"
	aliceKey, aliceSecret = "AKIAQSHAREALICE00001", "alice-secret-alice-secret-alice-secret-1"
	dashboardAuthFile     = `principals:
  - name: admin
    accessKeys: [{id: ` + adminKey + `, secret: ` + adminSecret + `}]
    policies: [admin]
  - name: alice
    accessKeys: [{id: ` + aliceKey + `, secret: ` + aliceSecret + `}]
    policies: [qs1-reader]
policies:
  admin:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: "batch:*", Resource: "*"}]
  qs1-reader:
    Version: "2012-10-17"
    Statement:
      - Effect: Allow
        Action: [batch:DescribeQuotaShare, batch:DescribeServiceJob, batch:GetServiceJobLogs]
        Resource: arn:aws:batch:*:*:job-queue/training/quota-share/QS1
      - Effect: Allow
        Action: [batch:GetJobQueueLending, batch:GetJobQueueSnapshot]
        Resource: arn:aws:batch:*:*:job-queue/training
      - Effect: Allow
        Action: [batch:DescribeJobQueues, batch:GetJobQueueLending, batch:GetEvents]
        Resource: "*"
`
)

// signIn fills in the page's sign-in form with a key and sends it, as a
// person would.
func (e *env) signIn(id, secret string) {
	e.t.Helper()
	e.waitFor("the sign-in form", `document.getElementById("signin")`, `document.querySelector("main").innerText`)
	if err := chromedp.Do(e.ctx, chromedp.SendKeys(chromedp.ID("access-key-id"), id), chromedp.SendKeys(chromedp.ID("secret-access-key"), secret),
		chromedp.Click(chromedp.ID("signin-button"))); err != nil {
		e.t.Fatalf("signing in as %s: %v", id, err)
	}
}

// shareNames returns the shares the Shares view shows, in order.
func (e *env) shareNames() string {
	var s string
	e.eval(`[...document.querySelectorAll("tr.share-row")].map(r => r.dataset.share).join()`, &s)
	return s
}

// TestSignedIn: with --auth the dashboard asks for an access key, signs
// every request with it in the browser (SigV4, checked by the server as
// any client's), and shows each principal what its policies let it read:
// alice sees her share's bar, its jobs in the queue and the timeline, and
// the refusal of what she may not read; admin sees everything, as qshare
// shares does. A wrong secret is refused with the server's words; signing
// out forgets the key.
func TestSignedIn(t *testing.T) {
	t.Parallel() // a server and a window of its own (TestMain)
	moreViews(t, "the dashboard signed in with --auth, each principal's views")
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	if err := os.WriteFile(file, []byte(dashboardAuthFile), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "--auth", file, "--events", filepath.Join(dir, "events.jsonl"))
	// The qshare commands sign as admin.
	e.Environ = []string{"AWS_ACCESS_KEY_ID=" + adminKey, "AWS_SECRET_ACCESS_KEY=" + adminSecret}
	e.OK("apply", "-f", "examples/three-shares.yaml")
	e.Submit("QS1", "qs1-high", 3)
	e.Submit("QS1", "qs1-med", 2)
	e.Submit("QS3", "qs3-job", 1)
	e.Submit("QS1", "qs1-low", 1)
	e.Submit("QS3", "qs3-wait", 1)
	e.await(map[string]string{"qs1-high": "RUNNING", "qs1-med": "RUNNING", "qs3-job": "RUNNING", "qs1-low": "RUNNABLE", "qs3-wait": "RUNNABLE"}, "qs1-low", "qs3-wait")

	// Unsigned, the page gets nothing: it asks for a key.
	e.open("shares")
	e.waitFor("the sign-in form", `document.getElementById("signin") && document.querySelectorAll("tr.share-row").length === 0`, `document.querySelector("main").innerText`)
	var unsigned string
	if err := chromedp.Do(e.ctx, chromedp.Evaluate[chromedp.Void](`fetch("/qshare/v1/lending").then(r => { window.unsignedAnswer = r.status + " " + r.headers.get("X-Amzn-ErrorType"); })`)); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the unsigned request's answer", `window.unsignedAnswer`, "")
	e.eval(`window.unsignedAnswer`, &unsigned)
	if unsigned != "403 MissingAuthenticationTokenException" {
		t.Errorf("an unsigned request from the page: %s, want 403 MissingAuthenticationTokenException", unsigned)
	}
	e.shot("signin")

	// A wrong secret: the server's refusal, and the form again.
	e.signIn(aliceKey, strings.Repeat("x", 40))
	e.waitFor("the refusal of a wrong secret", `document.getElementById("signin-error").textContent.includes("signature we calculated does not match")`, `document.querySelector("main").innerText`)

	// alice: her share only.
	e.signIn(aliceKey, aliceSecret)
	e.waitFor("alice signed in", `document.getElementById("principal").dataset.principal === "arn:aws:iam::000000000000:user/alice"`, `document.querySelector("header").innerText`)
	e.waitFor("QS1's bar alone", `document.querySelectorAll("tr.share-row").length === 1`, `document.querySelector("main").innerText`)
	if got := e.shareNames(); got != "QS1" {
		t.Fatalf("alice's Shares view shows %q, want QS1 alone", got)
	}
	var desc string
	e.eval(`document.querySelector('tr.share-row[data-share="QS1"] td.desc').textContent`, &desc)
	if desc != "1 in use · 1 borrowed from QS2" {
		t.Errorf("alice's QS1 bar says %q, want 1 in use · 1 borrowed from QS2", desc)
	}
	e.shot("shares-alice")
	low := e.describe("qs1-low")
	e.open("queue")
	e.waitFor("qs1-low at position 1 with its reason, and nothing of QS3's", fmt.Sprintf(`document.querySelector('table.front tr[data-job-name="qs1-low"][data-position="1"] td.reason').textContent === %q &&
		 document.querySelectorAll('table.front tbody tr').length === 1 && !document.querySelector('tr[data-share="QS3"]')`, low.StatusReason),
		`document.querySelector("main").innerText`)
	e.open("events")
	e.waitFor("the starts of QS1's jobs and nothing of QS3's", `document.querySelectorAll('tr[data-event="start"][data-share="QS1"]').length === 2 && !document.querySelector('tr[data-share="QS3"]')`,
		`document.querySelector("main").innerText`)
	e.open("job/" + low.JobID)
	e.waitFor("qs1-low's page", `document.querySelector('#job[data-job-name="qs1-low"]') && document.querySelector("#log").textContent.length > 0`, `document.querySelector("main").innerText`)
	// What her policies do not allow, the page says it may not read.
	e.open("job/" + e.describe("qs3-job").JobID)
	e.waitFor("the refusal of qs3-job", `document.getElementById("status").textContent.includes("not authorized to perform: batch:DescribeServiceJob")`, `document.querySelector("header").innerText`)
	e.open("jobs")
	e.waitFor("the refusal of every job's list", `document.getElementById("status").textContent.includes("user/alice is not authorized to perform: batch:ListServiceJobs")`, `document.querySelector("header").innerText`)

	// Signing out forgets the key.
	if err := chromedp.Do(e.ctx, chromedp.Click(chromedp.ID("signout"))); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the sign-in form after signing out", `document.getElementById("signin") && sessionStorage.length === 0 && !document.getElementById("principal")`, "")

	// admin: everything, as qshare shares says.
	e.signIn(adminKey, adminSecret)
	e.waitFor("admin signed in", `document.getElementById("principal").dataset.principal === "arn:aws:iam::000000000000:user/admin"`, "")
	e.checkSharesMatchCLI()
	if got := e.shareNames(); got != "QS1,QS2,QS3" {
		t.Errorf("admin's Shares view shows %q, want QS1,QS2,QS3", got)
	}
	e.open("queue")
	e.waitFor("qs1-low and qs3-wait in the queue", `document.querySelector('table.front tr[data-job-name="qs1-low"]') && document.querySelector('table.front tr[data-job-name="qs3-wait"][data-share="QS3"]')`,
		`document.querySelector("main").innerText`)
	e.open("events")
	e.waitFor("qs3-job's start", `document.querySelector('tr[data-event="start"][data-share="QS3"]')`, `document.querySelector("main").innerText`)
	e.open("jobs")
	e.waitFor("the five jobs", `document.querySelectorAll("table.jobs tbody tr").length === 5`, `document.querySelector("main").innerText`)

	// A key removed from the file and SIGHUP: the page, at its next
	// refresh, asks for a key again, saying why.
	if err := chromedp.Do(e.ctx, chromedp.Click(chromedp.ID("signout"))); err != nil {
		t.Fatal(err)
	}
	e.signIn(aliceKey, aliceSecret)
	e.open("shares")
	e.waitFor("alice's bar", `document.querySelectorAll("tr.share-row").length === 1`, `document.querySelector("main").innerText`)
	if err := os.WriteFile(file, []byte(strings.Replace(dashboardAuthFile, "    accessKeys: [{id: "+aliceKey+", secret: "+aliceSecret+"}]\n", "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(e.Srv.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the sign-in form with the server's refusal of the removed key", `document.getElementById("signin-error").textContent.includes("is not in this server's auth file")`, `document.querySelector("main").innerText`)
}
