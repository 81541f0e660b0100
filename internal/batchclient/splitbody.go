package batchclient

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// SplitBodyServer starts a stand-in server that answers every request with
// a ListServiceJobs response of n job summaries whose body arrives in two
// halves 5 ms apart: the response the SDK's own HTTP client fails to read
// (see the package comment). summary writes the i-th job summary as JSON.
// It is for the tests of the clients that must read such a response; the
// caller closes it.
func SplitBodyServer(n int, summary func(i int) string) *httptest.Server {
	var b strings.Builder
	b.WriteString(`{"jobSummaryList":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(summary(i))
	}
	b.WriteString(`]}`)
	body := []byte(b.String())
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		time.Sleep(5 * time.Millisecond)
		w.Write(body[len(body)/2:])
	}))
}
