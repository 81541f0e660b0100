package s3

import (
	"net/http"
	"strings"
	"time"
)

// readConditions are the conditional headers of a GetObject or
// HeadObject: the store evaluates them itself, against the answer's ETag
// (S3's, with a completed multipart upload's "-N", which gofakes3 does
// not know) and Last-Modified, where gofakes3 compared If-None-Match with
// the bare hash as a string and ignored If-Match and If-Unmodified-Since.
type readConditions struct {
	ifMatch, ifNoneMatch               string
	ifModifiedSince, ifUnmodifiedSince string
}

// takeReadConditions returns h's conditional headers, and takes them out
// of h so that gofakes3 evaluates none of them; nil if there are none.
func takeReadConditions(h http.Header) *readConditions {
	c := &readConditions{ifMatch: h.Get("If-Match"), ifNoneMatch: h.Get("If-None-Match"),
		ifModifiedSince: h.Get("If-Modified-Since"), ifUnmodifiedSince: h.Get("If-Unmodified-Since")}
	if *c == (readConditions{}) {
		return nil
	}
	for _, k := range []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"} {
		h.Del(k)
	}
	return c
}

// check returns the status that the conditions give an object of etag
// (quoted) and lastModified (an HTTP date, "" if unknown): 0 to serve it,
// 412 (S3's PreconditionFailed) or 304 (Not Modified). The order is RFC
// 9110's, which S3 documents: If-Match, else If-Unmodified-Since; then
// If-None-Match, else If-Modified-Since. A date that does not parse is no
// condition.
func (c *readConditions) check(etag, lastModified string) int {
	lm, lmErr := http.ParseTime(lastModified)
	since := func(v string) (time.Time, bool) {
		t, err := http.ParseTime(v)
		return t, err == nil && lmErr == nil && v != ""
	}
	if c.ifMatch != "" {
		if !matchETag(c.ifMatch, etag) {
			return http.StatusPreconditionFailed
		}
	} else if t, ok := since(c.ifUnmodifiedSince); ok && lm.After(t) {
		return http.StatusPreconditionFailed
	}
	if c.ifNoneMatch != "" {
		if matchETag(c.ifNoneMatch, etag) {
			return http.StatusNotModified
		}
	} else if t, ok := since(c.ifModifiedSince); ok && !lm.After(t) {
		return http.StatusNotModified
	}
	return 0
}

// matchETag reports whether list, an If-Match or If-None-Match value
// ("*", or ETags separated by commas, quoted or not, weak or not),
// names etag: S3 compares the ETags' values.
func matchETag(list, etag string) bool {
	etag = strings.Trim(etag, `"`)
	for _, v := range strings.Split(list, ",") {
		v = strings.TrimSpace(v)
		if v == "*" || strings.Trim(strings.TrimPrefix(v, "W/"), `"`) == etag {
			return true
		}
	}
	return false
}
