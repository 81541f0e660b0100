package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"qshare"
)

// Service is the signing name the server checks in a request's credential
// scope: AWS Batch's.
const Service = "batch"

// MaxSkew is how far a request's X-Amz-Date may be from the server's
// clock, as AWS allows.
const MaxSkew = 5 * time.Minute

const (
	algorithm    = "AWS4-HMAC-SHA256"
	amzDate      = "20060102T150405Z"
	scopeDate    = "20060102"
	maxHeaderLen = 8 << 10
)

// authorization is a parsed SigV4 Authorization header:
//
//	AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/aws4_request, SignedHeaders=h1;h2, Signature=HEX
type authorization struct {
	keyID, date, region, service, terminal string
	signedHeaders                          []string
	signature                              string
}

// parseAuthorization parses an Authorization header of the SigV4 form. Its
// error says what is wrong, in words for the caller; it never panics, on
// any input (FuzzParseAuthorization).
func parseAuthorization(h string) (authorization, error) {
	var a authorization
	if len(h) > maxHeaderLen {
		return a, errors.New("the Authorization header is too long")
	}
	alg, rest, ok := strings.Cut(h, " ")
	if !ok || alg != algorithm {
		return a, fmt.Errorf("the Authorization header must start with %s (AWS Signature Version 4)", algorithm)
	}
	var cred, signed, sig string
	seen := map[string]bool{}
	for _, part := range strings.Split(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, fmt.Errorf("the Authorization header's part %s is not KEY=VALUE", quote(strings.TrimSpace(part)))
		}
		if seen[k] {
			return a, fmt.Errorf("the Authorization header gives %s twice", quote(k))
		}
		seen[k] = true
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			sig = v
		default:
			return a, fmt.Errorf("the Authorization header's part %s is not known: give Credential, SignedHeaders and Signature", quote(k))
		}
	}
	if cred == "" || signed == "" || sig == "" {
		return a, errors.New("the Authorization header must give Credential, SignedHeaders and Signature")
	}
	f := strings.Split(cred, "/")
	if len(f) != 5 || f[0] == "" {
		return a, fmt.Errorf("the Credential %s is not ACCESS_KEY/DATE/REGION/SERVICE/aws4_request", quote(cred))
	}
	a.keyID, a.date, a.region, a.service, a.terminal = f[0], f[1], f[2], f[3], f[4]
	prev := ""
	for _, name := range strings.Split(signed, ";") {
		if name == "" || name != strings.ToLower(name) || strings.ContainsAny(name, " \t:") {
			return a, fmt.Errorf("SignedHeaders %s is not a ;-separated list of lower-case header names", quote(signed))
		}
		if name <= prev {
			return a, fmt.Errorf("SignedHeaders %s is not sorted, or names a header twice", quote(signed))
		}
		prev = name
		a.signedHeaders = append(a.signedHeaders, name)
	}
	if len(sig) != 64 || strings.Trim(sig, "0123456789abcdef") != "" {
		return a, errors.New("the Signature is not 64 lower-case hexadecimal digits")
	}
	a.signature = sig
	return a, nil
}

// Verifier checks SigV4 signatures against a Keyring, with the SDK's
// signer of each key (see keyEntry). It holds no state but its settings,
// and is safe for concurrent use.
type Verifier struct {
	// Region is the region requests must be signed for.
	Region string
	// Keys returns the keyring in force (it may change between calls, on a
	// reload).
	Keys func() *Keyring
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// BodyLimit returns the most bytes the request's route reads of a body;
	// nil means 1 MiB for every route.
	BodyLimit func(r *http.Request) int64
	// Pending, when not nil, bounds the bytes of bodies held, by all
	// requests together, while their signatures are not yet checked: a
	// request that would take more is refused (ThrottlingException, which
	// the SDKs retry) rather than have the server reserve memory for
	// every body that names a known key.
	Pending *ByteBudget
}

// ByteBudget is a number of bytes that requests take and give back. It is
// safe for concurrent use.
type ByteBudget struct {
	mu        sync.Mutex
	used, max int64
}

// NewByteBudget returns a budget of max bytes.
func NewByteBudget(max int64) *ByteBudget { return &ByteBudget{max: max} }

// take takes n bytes, or reports that there are not so many left.
func (b *ByteBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.max {
		return false
	}
	b.used += n
	return true
}

// give gives back n bytes.
func (b *ByteBudget) give(n int64) {
	if b == nil || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

// Used returns the bytes taken now.
func (b *ByteBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// NewVerifier returns a Verifier for region over the keyring keys returns.
func NewVerifier(region string, keys func() *Keyring) *Verifier {
	return &Verifier{Region: region, Keys: keys}
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Verify authenticates r and returns its principal. It reads the body (up
// to the route's limit) to hash it, and leaves r.Body a reader of the same
// bytes for the route; an S3 request's body it leaves unread, a reader
// that checks it against its declared hash (s3PayloadHash). Its errors are *qshare.Error values with code
// ENOSIGNATURE (no Authorization header), EUNKNOWNKEY (an access key the
// keyring lacks, or a session token, which qshare never issues),
// EBADSIGNATURE (a malformed header, a wrong scope, a date beyond MaxSkew, a
// payload hash that does not match, a signature that does not match) or
// EINVALID (a body over the limit, or one that cannot be read).
func (v *Verifier) Verify(r *http.Request) (*Principal, error) {
	p, _, _, err := v.verify(r, Service)
	return p, err
}

// verify is Verify for a request whose scope must name service, and also
// returns the access key id the request was signed with and its secret.
func (v *Verifier) verify(r *http.Request, service string) (p *Principal, keyID, secret string, err error) {
	hs := r.Header.Values("Authorization")
	if len(hs) == 0 {
		if q := r.URL.Query(); q.Has("X-Amz-Signature") || q.Has("X-Amz-Credential") {
			return nil, "", "", qshare.Errorf(qshare.ENOSIGNATURE, "Missing Authentication Token: this server accepts the signature in the Authorization header only, not in the query string (presigned URLs)")
		}
		return nil, "", "", qshare.Errorf(qshare.ENOSIGNATURE, "Missing Authentication Token: this server requires requests signed with AWS Signature Version 4; give the client an access key of the server's auth file (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, or --profile)")
	}
	if len(hs) > 1 {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "the request has %d Authorization headers: send one", len(hs))
	}
	a, err := parseAuthorization(hs[0])
	if err != nil {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "%s", err.Error())
	}
	key, ok := v.Keys().keys[a.keyID]
	if !ok && strings.HasPrefix(a.keyID, JobKeyPrefix) {
		return nil, "", "", qshare.Errorf(qshare.EUNKNOWNKEY, "The security token included in the request is invalid: access key %s is not the key of an attempt that runs now (a job's key ends with its attempt)", quote(a.keyID))
	}
	if !ok {
		return nil, "", "", qshare.Errorf(qshare.EUNKNOWNKEY, "The security token included in the request is invalid: access key %s is not in this server's auth file", quote(a.keyID))
	}
	if r.Header.Get("X-Amz-Security-Token") != "" {
		return nil, "", "", qshare.Errorf(qshare.EUNKNOWNKEY, "The security token included in the request is invalid: this server issues no session tokens; sign with an access key of its auth file alone")
	}
	if a.terminal != "aws4_request" {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "Credential should be scoped with a valid terminator: 'aws4_request', not %s", quote(a.terminal))
	}
	if a.service != service {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "Credential should be scoped to correct service: '%s', not %s", service, quote(a.service))
	}
	if a.region != v.Region {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "Credential should be scoped to a valid region: this server's is '%s', not %s", v.Region, quote(a.region))
	}
	signed := map[string]bool{}
	for _, h := range a.signedHeaders {
		signed[h] = true
	}
	if !signed["host"] || !signed["x-amz-date"] {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "SignedHeaders must include host and x-amz-date")
	}
	date := r.Header.Get("X-Amz-Date")
	t, err := time.Parse(amzDate, date)
	if err != nil {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "X-Amz-Date %s is not a date of the form 20060102T150405Z", quote(date))
	}
	if a.date != t.Format(scopeDate) {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "Credential should be scoped to the date of X-Amz-Date, %s, not %s", t.Format(scopeDate), quote(a.date))
	}
	now := v.now().UTC()
	if t.Before(now.Add(-MaxSkew)) {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "Signature expired: %s is now earlier than %s (%s - 5 min.)", date, now.Add(-MaxSkew).Format(amzDate), now.Format(amzDate))
	}
	if t.After(now.Add(MaxSkew)) {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "Signature not yet current: %s is still later than %s (%s + 5 min.)", date, now.Add(MaxSkew).Format(amzDate), now.Format(amzDate))
	}

	// Only now, with every part of the headers valid, is the body read:
	// its bytes count against Pending until the signature is checked. An
	// S3 body is not read here: its signature covers its declared hash,
	// which its reader checks as the store reads it (s3PayloadHash).
	var hash string
	if service == s3Service {
		if hash, err = s3PayloadHash(r); err != nil {
			return nil, "", "", err
		}
	} else {
		var held int64
		hash, held, err = v.bodyHash(r)
		defer v.Pending.give(held)
		if err != nil {
			return nil, "", "", err
		}
	}

	// The request as the client signed it: its method, path, query, host
	// and the headers it says it signed, with nothing else. The SDK's signer
	// computes what the signature must be.
	u := &url.URL{Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	c := &http.Request{Method: r.Method, URL: u, Host: r.Host, Header: http.Header{}}
	for _, h := range a.signedHeaders {
		switch h {
		case "host":
		case "content-length":
			c.ContentLength = r.ContentLength
		default:
			vals := r.Header.Values(h)
			if len(vals) == 0 {
				return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "SignedHeaders names %s, which the request does not have", quote(h))
			}
			c.Header[textproto.CanonicalMIMEHeaderKey(h)] = vals
		}
	}
	if err := key.signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: a.keyID, SecretAccessKey: key.secret}, c, hash, service, v.Region, t); err != nil {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "the signature could not be checked: %v", err)
	}
	want := c.Header.Get("Authorization")
	i := strings.LastIndex(want, "Signature=")
	if i < 0 || subtle.ConstantTimeCompare([]byte(want[i+len("Signature="):]), []byte(a.signature)) != 1 {
		return nil, "", "", qshare.Errorf(qshare.EBADSIGNATURE, "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method")
	}
	return key.owner, a.keyID, key.secret, nil
}

// bodyHash reads r's body (readBody) and returns its SHA-256 in
// hexadecimal, which must be X-Amz-Content-Sha256 where r has it, and the
// bytes it took of Pending, which the caller gives back once the signature
// is checked.
func (v *Verifier) bodyHash(r *http.Request) (string, int64, error) {
	body, held, err := v.readBody(r)
	if err != nil {
		return "", held, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if claimed := r.Header.Get("X-Amz-Content-Sha256"); claimed != "" && claimed != hash {
		return "", held, qshare.Errorf(qshare.EBADSIGNATURE, "X-Amz-Content-Sha256 is not the SHA-256 of the request body: this service takes signed payloads only (no UNSIGNED-PAYLOAD or streaming)")
	}
	return hash, held, nil
}

// readBody reads r's body up to its route's limit and puts the bytes back.
// It returns the bytes it took of Pending, which the caller gives back: a
// body of announced length takes all of it before a byte is read (so one
// beyond the budget is refused unread), into one buffer whose pages are
// touched only as bytes arrive; one of unknown length takes as it grows.
func (v *Verifier) readBody(r *http.Request) (body []byte, held int64, err error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, 0, nil
	}
	limit := int64(1 << 20)
	if v.BodyLimit != nil {
		limit = v.BodyLimit(r)
	}
	size := int64(4 << 10)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1
	}
	if r.ContentLength > limit {
		_ = r.Body.Close()
		return nil, 0, qshare.Errorf(qshare.EINVALID, "the request body is larger than %d bytes, the most this operation accepts", limit)
	}
	busy := func() ([]byte, int64, error) {
		_ = r.Body.Close()
		return nil, held, qshare.Errorf(qshare.ETHROTTLED, "Rate exceeded: the server holds as many request bodies awaiting their signature check as it may; retry shortly")
	}
	if !v.Pending.take(size) {
		return busy()
	}
	held = size
	b := make([]byte, 0, size)
	lr := io.LimitReader(r.Body, limit+1)
	for {
		if len(b) == cap(b) {
			if !v.Pending.take(int64(cap(b))) {
				return busy()
			}
			held += int64(cap(b))
			b = append(make([]byte, 0, 2*cap(b)), b...)
		}
		var n int
		n, err = lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	_ = r.Body.Close()
	if err != nil {
		return nil, held, qshare.Errorf(qshare.EINVALID, "the request body could not be read: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, held, qshare.Errorf(qshare.EINVALID, "the request body is larger than %d bytes, the most this operation accepts", limit)
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b, held, nil
}
