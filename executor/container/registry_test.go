package container_test

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/container"
	"qshare/executor/container/containertest"
	"qshare/executor/executortest"
	"qshare/internal/longtest"
	"qshare/internal/registry"
)

// pullPad is the size of the pushed image's random files, and pullRate the
// pace at which the registry's front serves each blob: a pull of a few
// seconds, long enough for its progress to show.
const (
	pullPad  = 24 << 20
	pullRate = 8 << 20
)

// TestRegistryPullDocker runs testRegistryPull on Docker Engine. Its
// seven attempts, against a registry throttled so that a pull's progress
// shows, take half a minute or more: it runs in .ci/run's long step
// (QSHARE_LONG=1), as the Podman one and the pull through the server
// (test/processe2e TestContainerRegistryPull) do.
func TestRegistryPullDocker(t *testing.T) {
	longtest.Only(t, "seven attempts against a throttled registry take half a minute or more; in the README's command TestPullSendsHelperCredentials, TestPullInBackground and TestImageNotFound check the pull")
	t.Parallel() // it mostly waits on the registry's throttled pull: beside the conformance suite
	host := containertest.Docker(t)
	testRegistryPull(t, host, containertest.Registry(t, pullRate))
}

// TestRegistryPullPodman runs testRegistryPull on a Podman service of its
// own, which takes the registry as plain HTTP through a registries.conf of
// its own. It runs where QSHARE_PODMAN_TESTS=1.
func TestRegistryPullPodman(t *testing.T) {
	if os.Getenv("QSHARE_PODMAN_TESTS") != "1" {
		t.Skip("set QSHARE_PODMAN_TESTS=1 to pull from a real registry into a Podman service of the test's own (.ci/run does)")
	}
	reg := containertest.Registry(t, pullRate)
	svc := containertest.PodmanServiceT(t, reg.Host)
	testRegistryPull(t, svc.Host, reg)
}

// progressRe is a line of a pull's progress: "Pulling image: 3.2 of 9.8 GB".
var progressRe = regexp.MustCompile(`Pulling image: (\d+\.\d) of (\d+\.\d) (GB|MB|kB)$`)

// testRegistryPull pulls from a real registry (the Distribution registry,
// htpasswd authentication) an image pushed to it and removed from the
// engine at host, with the credentials of a Docker config file's auths:
// the attempt's PendingReason and pull.log show the pull's progress, and
// it succeeds; the next attempt, of a new executor, finds the image and
// does not pull; with --pull always it asks the registry but downloads
// nothing; one after the image's removal from the engine, soon
// after that executor saw it, pulls it again (with --pull never, fails); with a wrong password the attempt fails as an image not
// found that says so; a credential helper's account pulls it; with --pull never an image the engine lacks fails
// the start.
func testRegistryPull(t *testing.T, host string, reg *registry.Server) {
	// Two layers of random bytes, which the engines download side by side.
	img := containertest.PushImage(t, host, reg, "team/train", pullPad/2, pullPad/2)
	auths := func(pass string) string {
		return `{"auths": {"` + reg.Host + `": {"auth": "` + base64.StdEncoding.EncodeToString([]byte(reg.User+":"+pass)) + `"}}}`
	}
	dockerConfig(t, auths(reg.Password))
	pulls := func() int { // the blob GETs the registry has answered: a pull's downloads
		n := 0
		for _, r := range reg.Requests() {
			if strings.HasPrefix(r, "GET /v2/team/train/blobs/") && strings.HasSuffix(r, " 200") {
				n++
			}
		}
		return n
	}
	before := pulls()
	payload := func(img, out string) map[string]any {
		return map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"}, "ContainerArguments": []string{"-run=0s", "-output=" + out}},
			"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}}
	}
	type exec struct {
		*container.Executor
		dir string
	}
	newExec := func(pull container.PullPolicy) exec {
		dir := t.TempDir()
		e, err := container.New(context.Background(), container.Options{DataDir: dir, Host: host, Pull: pull, GPUs: []string{"none"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return exec{e, dir}
	}
	// run runs an attempt of img on e, and returns its end, the
	// PendingReasons it went through, and its pull.log.
	run := func(e exec, id string) (executor.Exit, []string, string) {
		dir := e.dir
		s := spec(id, qshare.Capacity{"ml.m5.large": 1}, payload(img, "ran "+id))
		executortest.Start(t, e, s, time.Minute)
		// What the job's statusReason would say meanwhile, as the daemon
		// asks.
		var reasons []string
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		done := make(chan executor.Exit, 1)
		go func() { x, _ := e.Wait(ctx, s.AttemptID); done <- x }()
		for {
			if r := e.PendingReason(s.AttemptID); r != "" && (len(reasons) == 0 || reasons[len(reasons)-1] != r) {
				reasons = append(reasons, r)
			}
			select {
			case x := <-done:
				if ctx.Err() != nil {
					t.Fatalf("attempt %s did not end within 2 minutes", s.AttemptID)
				}
				b, _ := os.ReadFile(filepath.Join(dir, "attempts", s.AttemptID, "pull.log"))
				if x.Succeeded() {
					out, _ := os.ReadFile(filepath.Join(dir, "attempts", s.AttemptID, "output.log"))
					if !strings.Contains(string(out), "ran "+id) {
						t.Errorf("attempt %s succeeded with the log %q, want the job's output", id, out)
					}
				}
				if left := containertest.Leftovers(t, host, dir); len(left) > 0 {
					t.Errorf("containers left behind: %v", left)
				}
				return x, reasons, string(b)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	// The image is missing: it is pulled, with its progress.
	t0 := time.Now()
	x, reasons, log := run(newExec(container.PullMissing), "pulled")
	t.Logf("pulled %s in %v; pull.log:\n%sPendingReason seen: %q", img, time.Since(t0).Round(time.Millisecond), log, reasons)
	if !x.Succeeded() {
		t.Fatalf("the attempt whose image was pulled = %+v", x)
	}
	if pulls() == before {
		t.Errorf("the registry served no blob of %s: nothing was pulled", img)
	}
	checkProgress(t, "pull.log", strings.Split(strings.TrimSpace(log), "\n"), pullPad)
	checkProgress(t, "PendingReason", reasons, 0)

	// Present now: a new executor finds it, and does not pull it again.
	seen := len(reg.Requests())
	e := newExec(container.PullMissing)
	x, reasons, log = run(e, "present")
	if !x.Succeeded() || len(reasons) > 0 || log != "" {
		t.Errorf("the attempt of an image present = %+v, PendingReason %q, pull.log %q; want a start without a pull", x, reasons, log)
	}
	if r := reg.Requests()[seen:]; len(r) > 0 {
		t.Errorf("the registry saw %q from the attempt of an image the engine has", r)
	}
	// --pull always: each attempt asks the registry (for a tag that
	// moves), and downloads no layer the engine has (Podman fetches the
	// image's small config blob again; no layer's progress shows).
	seen, n := len(reg.Requests()), pulls()
	x, _, log = run(newExec(container.PullAlways), "always")
	asked := slices.ContainsFunc(reg.Requests()[seen:], func(r string) bool { return strings.Contains(r, " /v2/team/train/manifests/") })
	if !x.Succeeded() || !asked || pulls()-n > 1 || progressRe.MatchString(strings.TrimSpace(log)) || strings.Contains(log, "Pulling image: ") {
		t.Errorf("the attempt with --pull always = %+v; asked for the manifest: %v; blobs served again: %d; pull.log %q", x, asked, pulls()-n, log)
	}
	never := newExec(container.PullNever)
	if x, _, _ = run(never, "never-present"); !x.Succeeded() {
		t.Errorf("the attempt of an image present with --pull never = %+v", x)
	}

	// Removed from the engine within imageFresh of the executor's look:
	// the creation fails, and the attempt pulls it and goes on.
	containertest.RemoveImage(t, host, img)
	n = pulls()
	x, reasons, log = run(e, "removed")
	if !x.Succeeded() || pulls() == n {
		t.Errorf("the attempt of an image removed since it was seen = %+v, with %d pulls; want it pulled again", x, pulls()-n)
	}
	checkProgress(t, "pull.log of the image removed since it was seen", strings.Split(strings.TrimSpace(log), "\n"), pullPad)
	// With --pull never, such an attempt fails as an image not found.
	containertest.RemoveImage(t, host, img)
	_, err := never.Start(context.Background(), spec("never-removed", qshare.Capacity{"ml.m5.large": 1}, payload(img, "never")))
	want := "CannotStartContainerError: ClientError: image not found: " + img + " (removed from this host since it was seen)"
	if err == nil || err.Error() != want || qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("Start with --pull never of an image removed since it was seen: %v (code %q), want %q", err, qshare.ErrorCodeOf(err), want)
	}

	// A wrong password: the attempt fails, in SageMaker's words, and the
	// reason says the registry refused the credentials.
	dockerConfig(t, auths(reg.Password+"-wrong"))
	x, _, log = run(newExec(container.PullMissing), "refused")
	t.Logf("exit with a wrong password: %+v", x)
	if x.Succeeded() || x.Stopped || x.Lost || !strings.HasPrefix(x.Reason, "CannotStartContainerError: ClientError: image not found: "+img+" (") {
		t.Errorf("the attempt pulled with a wrong password = %+v, want a failure as an image not found", x)
	}
	if r := strings.ToLower(x.Reason); !strings.Contains(r, "unauthorized") && !strings.Contains(r, "authentication required") {
		t.Errorf("reason %q does not say that the registry refused the credentials", x.Reason)
	}
	if !strings.Contains(log, x.Reason) {
		t.Errorf("pull.log %q lacks the reason %q", log, x.Reason)
	}

	// A credential helper for the registry (credHelpers, as ECR's
	// docker-credential-ecr-login is set up) that gives its account: the
	// pull goes through.
	calls := fakeHelper(t, t.TempDir(), "qshare-test", reg.User, reg.Password)
	dockerConfig(t, `{"credHelpers": {"`+reg.Host+`": "qshare-test"}}`)
	if x, _, _ = run(newExec(container.PullMissing), "helper"); !x.Succeeded() {
		t.Errorf("the attempt pulled with a credential helper's account = %+v", x)
	}
	if b, err := os.ReadFile(calls); err != nil || string(b) != "get "+reg.Host+"\n" {
		t.Errorf("the credential helper's calls: %q, %v; want one get of %s", b, err, reg.Host)
	}
	containertest.RemoveImage(t, host, img)

	// --pull never: an image the engine lacks fails the start at once,
	// without asking the registry.
	seen = len(reg.Requests())
	_, err = newExec(container.PullNever).Start(context.Background(), spec("never", qshare.Capacity{"ml.m5.large": 1}, payload(img, "never")))
	want = "CannotStartContainerError: ClientError: image not found: " + img + " (not on this host, and --pull never)"
	if err == nil || err.Error() != want || qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("Start with --pull never and the image missing: %v (code %q), want %q", err, qshare.ErrorCodeOf(err), want)
	}
	if r := reg.Requests()[seen:]; len(r) > 0 {
		t.Errorf("the registry saw %q with --pull never", r)
	}
}

// checkProgress checks the progress lines among lines: at least one, each done no larger than its total and no smaller
// than the one before, no total smaller than the one before, and, where pad is above 0, the
// last one the whole pull, at least pad bytes.
func checkProgress(t *testing.T, what string, lines []string, pad int) {
	t.Helper()
	var last [2]float64
	var unit string
	n := 0
	for _, l := range lines {
		m := progressRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		done, _ := strconv.ParseFloat(m[1], 64)
		total, _ := strconv.ParseFloat(m[2], 64)
		if done > total || (n > 0 && (done < last[0] || total < last[1] || m[3] != unit)) {
			t.Errorf("%s: %q after %v %s", what, l, last, unit)
		}
		last, unit = [2]float64{done, total}, m[3]
		n++
	}
	if n == 0 {
		t.Fatalf("%s shows no progress of the pull (%q): want lines like %q", what, lines, "Pulling image: 3.2 of 9.8 GB")
	}
	if pad > 0 {
		scale := map[string]float64{"GB": 1e9, "MB": 1e6, "kB": 1e3}[unit]
		if last[0] != last[1] || last[1]*scale < float64(pad)*0.95 {
			t.Errorf("%s: the last progress is %v %s, want the whole pull of at least %d bytes", what, last, unit, pad)
		}
	}
	if slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "Pulling image: 0.0 of 0.0") }) {
		t.Errorf("%s: a figure that says nothing: %q", what, lines)
	}
}
