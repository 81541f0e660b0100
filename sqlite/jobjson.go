package sqlite

import (
	"encoding/json"

	"qshare"
)

// marshalJob returns the JSON of j for the jobs table's data column: j as
// json.Marshal writes it, with an empty payload. The payload goes to a
// column of its own, as it is: it is JSON itself, and as a JSON string
// every quote in it had to be escaped again at each write.
//
// A hand-written encoder stood here until it was measured against
// json.Marshal with the end-to-end submit benchmark: it bought about 5% of
// the server's CPU per submit and no measurable submit throughput, short
// of the 10% that would earn code which silently loses a field nobody
// taught it (docs/performance.md, "Hand-written codecs").
func marshalJob(j *qshare.Job) ([]byte, error) {
	c := *j
	c.Payload = ""
	return json.Marshal(&c)
}
