package data

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Endpoint says which S3 store the transfers use and as whom.
type Endpoint struct {
	// URL is an S3-compatible store's address (qshare's embedded one,
	// MinIO, versitygw); empty means AWS's own endpoints.
	URL string `json:"url,omitempty"`
	// Region signs the requests; empty means the SDK's (AWS_REGION), else
	// us-east-1.
	Region string `json:"region,omitempty"`
	// AccessKeyID and SecretAccessKey (and SessionToken) are the
	// credentials to use; empty means the SDK's default chain
	// (environment, shared files, instance role).
	AccessKeyID     string `json:"accessKeyId,omitempty"`
	SecretAccessKey string `json:"secretAccessKey,omitempty"`
	SessionToken    string `json:"sessionToken,omitempty"`
	// ChecksumTrailer says that the store takes a body sent as aws-chunked
	// with a trailing checksum (STREAMING-UNSIGNED-PAYLOAD-TRAILER) over
	// plain HTTP too, and checks that checksum, as qshare's embedded store
	// does. With it, and a URL of plain HTTP to a loopback address, object
	// bodies go that way (see trailerOnLoopback). A store that does not
	// take the framing would keep it as the object's bytes: leave it
	// false for any other store.
	ChecksumTrailer bool `json:"checksumTrailer,omitempty"`
}

// Client moves an attempt's data between S3 and its directories, through
// the AWS SDK's S3 client and its transfer manager (parallel parts,
// retries with backoff, checksums checked). It is safe for concurrent use.
type Client struct {
	s3 *s3.Client
	tm *transfermanager.Client
	// Concurrency is how many objects move at once.
	concurrency int
}

// MaxAttempts is how many times the SDK tries one request (with backoff)
// before a transfer fails.
const MaxAttempts = 5

// NewClient returns a Client for the store at ep.
func NewClient(ctx context.Context, ep Endpoint) (*Client, error) {
	opts := []func(*config.LoadOptions) error{config.WithRetryMaxAttempts(MaxAttempts)}
	if ep.Region != "" {
		opts = append(opts, config.WithRegion(ep.Region))
	}
	if ep.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(ep.AccessKeyID, ep.SecretAccessKey, ep.SessionToken)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("data: loading the AWS SDK's configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if ep.URL != "" {
			o.BaseEndpoint = aws.String(ep.URL)
			o.UsePathStyle = true
		}
		if ep.ChecksumTrailer && loopbackHTTP(ep.URL) {
			o.APIOptions = append(o.APIOptions, trailerOnLoopback)
		}
		// A store that keeps no checksums (gofakes3) would have the SDK
		// log a line per object into the job's log.
		o.DisableLogOutputChecksumValidationSkipped = true
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = MaxAttempts
			so.MaxBackoff = 5 * time.Second
			// The SDK's retry quota (a client-wide token bucket) would
			// stop the retries of a store that went down for a few
			// seconds under the parallel parts of one upload: each request
			// keeps its own MaxAttempts instead.
			so.RateLimiter = ratelimit.None
		})
	})
	return New(c), nil
}

// loopbackHTTP reports whether url is plain HTTP to a loopback IP address
// (the embedded store's address for executors on its host, 127.0.0.1): a
// connection whose bytes never leave the kernel, so that nothing between
// client and store can change them in flight.
func loopbackHTTP(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// trailerOnLoopback has the SDK send a PutObject's or a part's body to a
// store on a loopback address (loopbackHTTP) that checks trailers
// (Endpoint.ChecksumTrailer) as it does over HTTPS: aws-chunked, with a
// CRC32 trailer that the store checks (the embedded store answers
// BadDigest to a body that is not the trailer's), and the payload left out
// of the signature (STREAMING-UNSIGNED-PAYLOAD-TRAILER). Over plain HTTP
// the SDK would sign the body's SHA-256 instead: one more pass over each
// part before it is sent, which buys nothing on a connection that no one
// but root can tamper with (and which the embedded store checks only under
// --auth, where it checks the trailer always), and which made the model's
// upload to the embedded store slower (docs/data.md, "Measured"). The SDK only
// takes the trailer over HTTPS, so the request is seen as HTTPS by its two
// checksum steps alone and goes back to plain HTTP before it is signed:
// every other request (no body, or a body with no checksum, such as
// CompleteMultipartUpload's) is signed with its SHA-256 as before. Over a
// network, plain HTTP keeps the signed SHA-256.
func trailerOnLoopback(s *middleware.Stack) error {
	const checksum, trailer = "AWSChecksum:ComputeInputPayloadChecksum", "addInputChecksumTrailer"
	_, hasChecksum := s.Finalize.Get(checksum)
	_, hasTrailer := s.Finalize.Get(trailer)
	if !hasChecksum || !hasTrailer {
		return nil
	}
	if err := s.Finalize.Insert(schemeAs("https"), checksum, middleware.Before); err != nil {
		return err
	}
	return s.Finalize.Insert(schemeAs("http"), trailer, middleware.After)
}

// schemeAs is a step that sets the request's URL scheme.
type schemeAs string

func (m schemeAs) ID() string { return "qshare:schemeAs:" + string(m) }

func (m schemeAs) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		u := *req.URL
		u.Scheme = string(m)
		req.URL = &u
	}
	return next.HandleFinalize(ctx, in)
}

// New returns a Client over an S3 client that the caller configured.
func New(c *s3.Client) *Client {
	return &Client{s3: c, tm: transfermanager.New(c, func(o *transfermanager.Options) { o.Concurrency = PartConcurrency }), concurrency: 8}
}

// PartConcurrency is how many parts of one object move at once: the AWS
// CLI's 10 (max_concurrent_requests), where the transfer manager's
// default is 5.
const PartConcurrency = 10

// S3 returns the SDK client the Client uses.
func (c *Client) S3() *s3.Client { return c.s3 }

// Error is a transfer's failure, with the attempt's status reason in
// SageMaker's words. Client is true when the job's payload, its data or
// its rights caused it (a missing bucket, a refused credential, a key
// outside the channel), false when the store did not answer.
type Error struct {
	Reason string
	Client bool
	Err    error
}

func (e *Error) Error() string { return e.Reason }
func (e *Error) Unwrap() error { return e.Err }

// Reason returns the status reason of err: an *Error's Reason, or err's
// text.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return err.Error()
}

// The beginnings of the reasons, as SageMaker words them.
const (
	downloadFailed = "Data download failed"
	uploadFailed   = "Artifact upload failed"
)

// fail wraps err as the *Error of what (downloadFailed, uploadFailed),
// saying what it was about (where).
func fail(what, where string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	client, detail := classify(err)
	prefix := "ClientError: "
	if !client {
		prefix = "InternalServerError: "
	}
	msg := detail
	if where != "" {
		msg = where + ": " + detail
	}
	return &Error{Reason: prefix + what + ": " + msg, Client: client, Err: err}
}

// clientError is an *Error that the job caused, with a message of ours.
func clientError(what, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	return &Error{Reason: "ClientError: " + what + ": " + msg, Client: true, Err: errors.New(msg)}
}

// classify tells an error the job caused (an S3 answer in the 4xx range, a
// file it planted) from one of the store (no answer, 5xx), and says it in
// a line.
func classify(err error) (bool, string) {
	var api smithy.APIError
	if errors.As(err, &api) {
		var re interface{ HTTPStatusCode() int }
		status := 0
		if errors.As(err, &re) {
			status = re.HTTPStatusCode()
		}
		client := status == 0 || status < 500
		switch api.ErrorCode() {
		case "NoSuchBucket":
			return true, "the bucket does not exist (NoSuchBucket)"
		case "AccessDenied", "Forbidden":
			return true, "access denied: the credentials may not read or write this location (AccessDenied)"
		case "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken":
			return true, "the store refused the credentials (" + api.ErrorCode() + ")"
		case "NoSuchKey", "NotFound":
			return true, "the object does not exist (" + api.ErrorCode() + ")"
		}
		if status == http.StatusForbidden {
			return true, "access denied (HTTP 403)"
		}
		return client, fmt.Sprintf("%s: %s", api.ErrorCode(), api.ErrorMessage())
	}
	var le *localError
	if errors.As(err, &le) {
		return true, le.Error()
	}
	if errors.Is(err, context.Canceled) {
		return false, "cancelled"
	}
	return false, "the S3 store did not answer after " + fmt.Sprint(MaxAttempts) + " tries: " + err.Error()
}
