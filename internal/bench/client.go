package bench

import (
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"qshare/internal/batchclient"
)

// ClientOptions say how the harness's AWS SDK client talks to the server.
type ClientOptions struct {
	// Conns is the number of requests the client sends at once: the
	// transport keeps that many connections open (and a few more) instead
	// of the default two.
	Conns int
	// Sign signs every request with SigV4 and placeholder static
	// credentials, as a client of real AWS Batch would. qshare checks no
	// signatures yet, so by default the harness sends its requests
	// unsigned (aws.AnonymousCredentials: the SDK skips signing and the
	// payload hash), and spends its share of the machine's CPU on
	// submitting rather than on signing; --sign measures the other way.
	Sign bool
	// Key, when set, signs every request with this access key (id,
	// secret): for a server with authentication on.
	Key [2]string
}

// NewClient returns an AWS Batch client for a qshare endpoint: no retries
// (a failed request is a failed measurement, not something to hide), an
// HTTP transport that keeps a connection per concurrent request, and
// responses read whole through batchclient.BufferedDoer, so that a
// response body that arrives in pieces does not fail a run (the SDK's
// split-body bug; see the batchclient package).
func NewClient(endpoint string, opt ClientOptions) *batch.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        opt.Conns + 16,
		MaxIdleConnsPerHost: opt.Conns + 16,
		IdleConnTimeout:     90 * time.Second,
	}
	var creds aws.CredentialsProvider = aws.AnonymousCredentials{}
	if opt.Sign {
		creds = credentials.NewStaticCredentialsProvider("bench", "bench", "")
	}
	if opt.Key[0] != "" {
		creds = credentials.NewStaticCredentialsProvider(opt.Key[0], opt.Key[1], "")
	}
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: creds,
		HTTPClient:  batchclient.BufferedDoer{Client: &http.Client{Transport: tr, Timeout: 60 * time.Second}},
		Retryer:     func() aws.Retryer { return aws.NopRetryer{} },
	}
	return batch.NewFromConfig(cfg, func(o *batch.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	})
}

// ms converts an AWS epoch-milliseconds timestamp to a time.
func ms(p *int64) time.Time {
	if p == nil || *p == 0 {
		return time.Time{}
	}
	return time.UnixMilli(*p)
}

// harnessGOGC is the garbage collector's setting while a benchmark's
// clients run, unless GOGC is set: the harness shares the machine's cores
// with the server it measures, and at the default its collector took CPU
// from the server and paused clients mid-request, which showed in the
// server's latency (bench submit, 64 clients, alternated runs: about 15%
// more submits per second and a 15% lower p99 at 400).
const harnessGOGC = 400

// lessGC applies harnessGOGC and returns the function that restores the
// previous setting.
func lessGC() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(harnessGOGC)
	return func() { debug.SetGCPercent(old) }
}
