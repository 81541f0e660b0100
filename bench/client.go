package bench

import (
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
)

// NewClient returns an AWS Batch client for a qshare endpoint: static
// credentials, no retries (a failed request is a failed measurement, not
// something to hide), and an HTTP transport that keeps a connection per
// concurrent client instead of the default two.
func NewClient(endpoint string, conns int) *batch.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
	}
	cfg := aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("bench", "bench", ""),
		HTTPClient:  &http.Client{Transport: tr, Timeout: 60 * time.Second},
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
