package security_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"

	"qshare/internal/serveproc"
)

// oneEndpoint is run by boto3 with AWS_ENDPOINT_URL naming qshare, as the
// SageMaker SDK runs it: every service goes to the same port. It prints,
// as JSON, STS's identity and, for each other call, the error code that
// botocore parsed from the answer (or "ok").
const oneEndpoint = `
import json, os, sys, boto3, botocore.exceptions
def check():
  out = {}
  def code(name, fn):
      try:
          fn(); out[name] = "ok"
      except botocore.exceptions.ClientError as e:
          out[name] = e.response["Error"]["Code"]
      except Exception as e:
          out[name] = "exception: " + type(e).__name__ + ": " + str(e)[:200]
  s = boto3.session.Session(region_name="us-east-1")
  try:
      ident = s.client("sts").get_caller_identity()
      out["sts"] = ident["Account"] + " " + ident["Arn"]
  except botocore.exceptions.ClientError as e:
      out["sts"] = e.response["Error"]["Code"]
  code("sns", lambda: s.client("sns").list_topics())
  code("sqs", lambda: s.client("sqs").list_queues())
  code("sagemaker-unknown", lambda: s.client("sagemaker").list_endpoints())
  return out
results = []
for endpoint, key, secret in json.loads(sys.argv[1]):
    os.environ.update(AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=secret)
    results.append(check())
print(json.dumps(results))
`

// TestBoto3OneEndpoint: boto3 with AWS_ENDPOINT_URL pointed at qshare
// (botocore's setting for every service) gets STS's GetCallerIdentity, and
// for a service qshare does not serve, or an operation SageMaker's part of
// it does not, an error that botocore parses by its code in that
// service's protocol (never a 500 or a page); with --auth and a wrong
// secret, STS's own SignatureDoesNotMatch.
func TestBoto3OneEndpoint(t *testing.T) {
	t.Parallel() // a server of its own, and mostly waiting (TestMain)
	py, ok := pythonWith("boto3")
	if !ok {
		t.Skip("needs python3 with boto3")
	}
	dir := t.TempDir()
	plain := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "plain"), Args: []string{"--executor", "simulated", "--log-level", "error"}})
	signed := startWithAuth(t)
	// Both servers' checks in one Python: a start of it with boto3 is
	// about a second of CPU.
	targets, _ := json.Marshal([][3]string{{plain.Endpoint, "dummy", "dummy"}, {signed.Endpoint, aliceKey[0], "not-alices-secret-not-alices-secret"}})
	cmd := exec.Command(py, "-c", oneEndpoint, string(targets))
	cmd.Env = append(serveproc.Environ(), "AWS_MAX_ATTEMPTS=1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("boto3: %v\n%s", err, b)
	}
	var outs []map[string]string
	must(t, json.Unmarshal(b, &outs))
	if len(outs) != 2 {
		t.Fatalf("boto3 printed %s, want the checks of two servers", b)
	}
	got := outs[0]
	t.Logf("without --auth: %v", got)
	for name, want := range map[string]string{"sns": "InvalidAction", "sqs": "UnknownOperationException", "sagemaker-unknown": "UnknownOperationException"} {
		if got[name] != want {
			t.Errorf("%s through boto3: %q, want %s", name, got[name], want)
		}
	}
	if got["sts"] == "" || got["sts"][:12] != "000000000000" {
		t.Errorf("STS GetCallerIdentity through boto3: %q, want the account and an ARN", got["sts"])
	}
	if got := outs[1]; got["sts"] != "SignatureDoesNotMatch" {
		t.Errorf("STS through boto3 with a wrong secret: %q, want SignatureDoesNotMatch", got["sts"])
	}
}
