// Package jsonload decodes the records that a store's Load reads back
// (sqlite/, postgres/): each row holds one record as JSON, and optionally a
// second column that the store puts into the decoded record (a job's
// payload, kept beside its JSON). Decoding the JSON costs more than reading
// the rows, so it runs on every core: the rows are read in chunks and each
// chunk is decoded by a worker while the next ones are read. State is the
// whole of such a Load, the same for both stores: which tables it reads, in
// which order, and how each record's JSON is decoded.
package jsonload

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Rows is the part of a query's result that Decode reads; database/sql's
// *sql.Rows and pgx's pgx.Rows both have it. Decode does not close it.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// chunkSize is how many rows one worker decodes at a time.
const chunkSize = 256

// Decode reads every row of rows and decodes it, in order. Without extra
// (nil), each row is one column, the record's JSON; with extra, it is two,
// the JSON and a value of type X that extra puts into the decoded record.
// It returns nil for no rows; the first error in reading (the rows' own
// included), or else the first record that does not decode, named by its
// position ("decode record 3: ...").
func Decode[T, X any](rows Rows, extra func(*T, X)) ([]T, error) {
	type chunk struct {
		first int // index of the chunk's first row, for error messages
		raw   [][]byte
		extra []X
		out   *[]T
	}
	work := make(chan chunk, 4)
	var (
		wg      sync.WaitGroup
		errOnce sync.Once
		decErr  error
		failed  atomic.Bool
	)
	for range max(1, runtime.GOMAXPROCS(0)) {
		wg.Go(func() {
			for c := range work {
				if failed.Load() {
					continue
				}
				out := make([]T, len(c.raw))
				for i, b := range c.raw {
					if err := json.Unmarshal(b, &out[i]); err != nil {
						errOnce.Do(func() { decErr = fmt.Errorf("decode record %d: %w", c.first+i+1, err) })
						failed.Store(true)
						break
					}
					if extra != nil {
						extra(&out[i], c.extra[i])
					}
				}
				*c.out = out
			}
		})
	}
	var chunks []*[]T
	n := 0
	raw := make([][]byte, 0, chunkSize)
	var extras []X
	flush := func() {
		p := new([]T)
		chunks = append(chunks, p)
		work <- chunk{first: n - len(raw), raw: raw, extra: extras, out: p}
		raw = make([][]byte, 0, chunkSize)
		extras = nil
	}
	var err error
	for rows.Next() {
		// Scanning into []byte copies the row's bytes (a driver may reuse
		// its buffer for the next row).
		var b []byte
		if extra == nil {
			err = rows.Scan(&b)
		} else {
			var x X
			err = rows.Scan(&b, &x)
			extras = append(extras, x)
		}
		if err != nil {
			break
		}
		raw = append(raw, b)
		n++
		if len(raw) == chunkSize {
			flush()
		}
	}
	if len(raw) > 0 {
		flush()
	}
	close(work)
	wg.Wait()
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return nil, err
	}
	if decErr != nil {
		return nil, decErr
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]T, 0, n)
	for _, c := range chunks {
		out = append(out, *c...)
	}
	return out, nil
}
