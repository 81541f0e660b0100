package batchclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// Placeholder is the credentials qshare's tools sign with when none are
// configured: a server without authentication reads no signature, so the
// demo and the tour need no credentials at all. It compares equal to itself
// (creds == Placeholder tells whether Credentials found none).
var Placeholder aws.CredentialsProvider = placeholder{}

// placeholder is Placeholder's type: the access key "qshare", secret
// "qshare".
type placeholder struct{}

// Retrieve implements aws.CredentialsProvider.
func (placeholder) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{AccessKeyID: "qshare", SecretAccessKey: "qshare", Source: "qshare placeholder"}, nil
}

// Credentials finds the credentials of a client the standard AWS way,
// through the SDK's config loader: the environment (AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_PROFILE), the shared files (~/.aws/credentials
// and ~/.aws/config) and their profile, or profile when it is not empty
// (qshare's --profile). The EC2 instance metadata service is not asked, so
// that a machine outside EC2 does not wait for it. With no credentials
// anywhere and no profile named, it returns Placeholder; a named profile
// that cannot be used is an error.
func Credentials(ctx context.Context, profile string) (aws.CredentialsProvider, error) {
	creds, _, err := Load(ctx, profile)
	return creds, err
}

// Load reads the AWS configuration once, through the SDK's loader, and
// returns what qshare's tools take from it: the credentials (as
// Credentials finds them) and the HTTP client (as HTTPClient makes it).
// The SDK parses the CA bundle as it loads: a second parse of a bundle of
// the system's 140 certificates cost a short command (qshare jobs) about
// a sixth of its page faults and a fifth of its CPU.
func Load(ctx context.Context, profile string) (aws.CredentialsProvider, *http.Client, error) {
	cfg, err := loadConfig(ctx, profile)
	if err != nil {
		return nil, nil, err
	}
	hc := httpClientOf(cfg)
	if cfg.Credentials == nil {
		return Placeholder, hc, nil
	}
	creds := aws.NewCredentialsCache(cfg.Credentials)
	if _, err := creds.Retrieve(ctx); err != nil {
		if profile != "" || os.Getenv("AWS_PROFILE") != "" {
			return nil, nil, fmt.Errorf("no usable credentials in the AWS profile: %w", err)
		}
		return Placeholder, hc, nil
	}
	return creds, hc, nil
}

// loadConfig loads the AWS configuration of profile ("" for the default
// one), without asking the EC2 instance metadata service.
func loadConfig(ctx context.Context, profile string) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{config.WithEC2IMDSClientEnableState(imds.ClientDisabled)}
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	switch {
	case err == nil:
		return cfg, nil
	case profile != "":
		return cfg, fmt.Errorf("--profile %s: %w", profile, err)
	case os.Getenv("AWS_CA_BUNDLE") != "":
		return cfg, fmt.Errorf("reading the AWS configuration (AWS_CA_BUNDLE=%s): %w", os.Getenv("AWS_CA_BUNDLE"), err)
	}
	return cfg, fmt.Errorf("reading the AWS configuration: %w", err)
}

// HTTPClient returns the HTTP client of qshare's tools: plain, but for a
// server whose certificate is signed by a private CA, it trusts the CA
// certificates of the PEM file that AWS_CA_BUNDLE (or the profile's
// ca_bundle) names, as the AWS SDKs and CLI do.
func HTTPClient() (*http.Client, error) {
	cfg, err := loadConfig(context.Background(), "")
	if err != nil {
		return nil, err
	}
	return httpClientOf(cfg), nil
}

// httpClientOf returns an HTTP client over the transport of cfg's: the
// SDK's loader makes one, with the CA bundle's certificates as its only
// roots, where a bundle is named; otherwise a plain client.
func httpClientOf(cfg aws.Config) *http.Client {
	if bc, ok := cfg.HTTPClient.(*awshttp.BuildableClient); ok {
		return &http.Client{Transport: bc.GetTransport()}
	}
	return &http.Client{}
}

// SigningTransport is an http.RoundTripper that signs each request with AWS
// Signature Version 4 for service batch, with the SDK's own signer, before
// Base sends it: how qshare's tools call the server's extension endpoints
// (logs, lending), which the SDK's Batch client does not know. It does not
// change the request it is given. It is safe for concurrent use if Base
// and Creds are.
type SigningTransport struct {
	// Base sends the signed requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// Creds and Region sign them.
	Creds  aws.CredentialsProvider
	Region string
	// Now is the signing clock; nil means time.Now.
	Now func() time.Time
}

// RoundTrip implements http.RoundTripper.
func (t *SigningTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.Creds == nil {
		return nil, errors.New("batchclient: SigningTransport has no credentials")
	}
	creds, err := t.Creds.Retrieve(r.Context())
	if err != nil {
		return nil, fmt.Errorf("retrieving AWS credentials: %w", err)
	}
	c := r.Clone(r.Context())
	var body []byte
	if r.Body != nil && r.Body != http.NoBody {
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
		c.Body = io.NopCloser(bytes.NewReader(body))
		c.ContentLength = int64(len(body))
	}
	sum := sha256.Sum256(body)
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	// A signer per request: the SDK's signer caches the signing key it
	// derives by access key id and day, not by secret, so a shared one
	// would sign with a stale secret after a rotation.
	if err := v4.NewSigner().SignHTTP(r.Context(), creds, c, hex.EncodeToString(sum[:]), "batch", t.Region, now()); err != nil {
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(c)
}

// SignedHTTPClient returns an *http.Client like base (nil: a plain one)
// whose requests are signed with creds for region (SigningTransport).
func SignedHTTPClient(base *http.Client, creds aws.CredentialsProvider, region string) *http.Client {
	if base == nil {
		base = &http.Client{}
	}
	c := *base
	c.Transport = &SigningTransport{Base: base.Transport, Creds: creds, Region: region}
	return &c
}
