package processe2e_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/executor/container/containertest"
	"qshare/internal/longtest"
)

// TestContainerRegistryPull runs container jobs through the SDK whose
// image is in a real registry (the Distribution registry, htpasswd
// authentication) and not on the engine: `qshare serve --pull missing`
// pulls it with the credentials of the Docker config file that
// DOCKER_CONFIG names in its environment, the job's statusReason says how
// far the pull is ("Pulling image: 12.6 of 27.3 MB"), and the job
// succeeds; the next job of the image does not pull it; with a wrong
// password in the file the pull, and the job, fail; a server with
// --pull never fails a job whose image the engine lacks, in SageMaker's
// words, after one attempt, as the job's own failure, not as a lack of
// capacity that would keep it waiting.
//
// It is in the long set (QSHARE_LONG=1, .ci/run's long step, beside the
// seven pulls of executor/container's TestRegistryPullDocker and
// TestRegistryPullPodman): its registry, push and throttled pull cost 7 s
// of CPU on the slower kind of 2-core machine (7 December 2026), where
// the README's command was over its five minutes. In that command,
// executor/container's TestPullSendsHelperCredentials and
// TestPullInBackground check the credentials sent and a pull that
// outlives its Start, and TestImageNotFound a missing image.
func TestContainerRegistryPull(t *testing.T) {
	skipShort(t)
	longtest.Only(t, "a pull from a real registry through the server; in the README's command executor/container's TestPullSendsHelperCredentials, TestPullInBackground and TestImageNotFound check the pull")
	host := containertest.Docker(t)
	// 24 MB at 8 MB/s: three seconds of pull, while the test asks for the
	// job's status every 50 ms.
	reg := containertest.Registry(t, 8<<20)
	img := containertest.PushImage(t, host, reg, "team/train", 24<<20)
	conf := t.TempDir()
	auths := func(pass string) {
		must(t, os.WriteFile(filepath.Join(conf, "config.json"), []byte(`{"auths": {"`+reg.Host+`": {"auth": "`+
			base64.StdEncoding.EncodeToString([]byte(reg.User+":"+pass))+`"}}}`), 0o600))
	}
	auths(reg.Password)
	o := serverOpts{args: []string{"--executor", "container", "--container-host", host, "--pull", "missing"}, env: []string{"DOCKER_CONFIG=" + conf},
		ended: func(dir string) bool { _, err := os.Stat(filepath.Join(dir, "exit.json")); return err == nil }}
	s := startServer(t, newDataDir(t), o)
	limits := map[string]int32{"ml.m5.xlarge": 2}
	s.setup(limits, share{name: "a", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve})

	// run submits a job of img and returns its end and the statusReasons
	// it went through.
	run := func(s *server, name string, want types.ServiceJobStatus) (*batch.DescribeServiceJobOutput, []string) {
		id := s.submit(containerJob(img, name, "-run=0s", "-output=ran "+name))
		var reasons []string
		d := s.Await(id, string(want), func(d *batch.DescribeServiceJobOutput) bool {
			if r := aws.ToString(d.StatusReason); len(reasons) == 0 || reasons[len(reasons)-1] != r {
				reasons = append(reasons, r)
			}
			return d.Status == want
		})
		t.Logf("job %s: %s after %q", name, d.Status, reasons)
		return d, reasons
	}
	progress := regexp.MustCompile(`^Attempt 1 waits to run in container: Pulling image: \d+\.\d of \d+\.\d MB$`)
	d, reasons := run(s, "pulled", types.ServiceJobStatusSucceeded)
	if !slices.ContainsFunc(reasons, progress.MatchString) {
		t.Errorf("the job's statusReason never showed the pull's progress: %q", reasons)
	}
	if got := s.mustLogs(aws.ToString(d.JobId), 1); !strings.Contains(got, "ran pulled") {
		t.Errorf("log of the job whose image was pulled = %q", got)
	}
	seen := len(reg.Requests())
	_, reasons = run(s, "present", types.ServiceJobStatusSucceeded)
	if slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, "Pulling") }) {
		t.Errorf("the job of an image the engine has went through %q", reasons)
	}
	if r := reg.Requests()[seen:]; len(r) > 0 {
		t.Errorf("the registry saw %q from the job of an image the engine has", r)
	}

	// The file is read at each pull: a wrong password now fails the pull,
	// and the job after its one attempt, as its own failure.
	containertest.RemoveImage(t, host, img)
	auths(reg.Password + "-wrong")
	d, _ = run(s, "refused", types.ServiceJobStatusFailed)
	want := "CannotStartContainerError: ClientError: image not found: " + img + " ("
	if rs := attemptReasons(d); len(rs) != 1 || !strings.HasPrefix(rs[0], want) || !strings.Contains(rs[0], "authentication required") {
		t.Errorf("the job whose pull the registry refused ended after the attempts %q, want one that starts %q and says why", rs, want)
	}
	s.stop()

	o.args[len(o.args)-1] = "never"
	s = startServer(t, newDataDir(t), o)
	s.setup(limits, share{name: "a", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve})
	seen = len(reg.Requests())
	d, _ = run(s, "never", types.ServiceJobStatusFailed)
	want = "CannotStartContainerError: ClientError: image not found: " + img + " (not on this host, and --pull never)"
	if rs := attemptReasons(d); len(rs) != 1 || !strings.Contains(rs[0], want) {
		t.Errorf("the job whose image is missing under --pull never ended after the attempts %q, want one that says %q", rs, want)
	}
	if r := reg.Requests()[seen:]; len(r) > 0 {
		t.Errorf("the registry saw %q", r)
	}
}
