package s3

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestPartLayout: a layout kept in metadata reads back as it was, S3's
// 10,000 parts of one size but the last in a few bytes; a PutObject's
// (none) takes away the old object's and any of a client's; an entry
// that is not whole (a count that is not its sizes', a size that is no
// number, a part of no bytes) is no layout, and checksums that are not one a part are none.
func TestPartLayout(t *testing.T) {
	many := partLayout{sizes: make([]int64, 10000)}
	for i := range many.sizes {
		many.sizes[i] = 8 << 20
	}
	many.sizes[9999] = 5
	for _, l := range []partLayout{
		many,
		{sizes: []int64{5 << 20, 1}, sums: []string{"AAAAAA==", "BBBBBB=="}},
		{sizes: []int64{1, 2, 2, 1}},
	} {
		meta := map[string]string{"X-Amz-Meta-V": "kept"}
		l.keep(meta)
		got, ok := layoutOf(func(k string) string { return meta[k] })
		if !ok || !reflect.DeepEqual(got, l) || meta["X-Amz-Meta-V"] != "kept" {
			t.Errorf("layout of %d parts read back as %v (%v), meta %v", len(l.sizes), ok, len(got.sizes), meta["X-Amz-Meta-V"])
		}
	}
	meta := map[string]string{}
	many.keep(meta)
	if n := len(meta[partSizesKey]); n > 20 {
		t.Errorf("10,000 parts of one size but the last take %d bytes: %q", n, meta[partSizesKey])
	}
	meta[ownPrefix+"Other"] = "a client's"
	partLayout{}.keep(meta)
	if len(meta) != 0 {
		t.Errorf("a layout of no parts leaves %v", meta)
	}
	for _, m := range []map[string]string{
		{partsKey: "3", partSizesKey: "5*2"},
		{partsKey: "2", partSizesKey: "5*3"},
		{partsKey: "2", partSizesKey: "5,x"},
		{partsKey: "1", partSizesKey: "-1"},
		{partsKey: "1", partSizesKey: "0"},
		{partsKey: "1"},
		{partsKey: strconv.Itoa(10001), partSizesKey: "1*10001"},
	} {
		if l, ok := layoutOf(func(k string) string { return m[k] }); ok {
			t.Errorf("%v read as a layout of %d parts", m, len(l.sizes))
		}
	}
	l, ok := layoutOf(func(k string) string {
		return map[string]string{partsKey: "2", partSizesKey: "5*2", partSumsKey: strings.Repeat("x,", 2)}[k]
	})
	if !ok || l.sums != nil {
		t.Errorf("three checksums for two parts read as %v (%v)", l.sums, ok)
	}
}

// TestPartOfAnotherObject: the answer to a read of one part whose
// object was replaced between the part's lookup and the read (another
// ETag, or other parts) is SlowDown, which the SDKs retry, not the range
// of the new object as the part.
func TestPartOfAnotherObject(t *testing.T) {
	for _, h := range []map[string]string{
		{"ETag": `"new"`, partSizesKey: "5*2"},
		{"ETag": `"old"`, partSizesKey: "6*2"},
		{"ETag": `"old"`},
	} {
		rec := httptest.NewRecorder()
		w := &etagWriter{ResponseWriter: rec, part: &partRead{n: 1, count: 2, etag: `"old"`, sizes: "5*2"}}
		for k, v := range h {
			rec.Header().Set(k, v)
		}
		w.WriteHeader(http.StatusPartialContent)
		w.Write([]byte("12345"))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "SlowDown") || strings.Contains(rec.Body.String(), "12345") {
			t.Errorf("a part read of %v: %d %s, want 503 SlowDown", h, rec.Code, rec.Body)
		}
	}
}
