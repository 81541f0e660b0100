package jsonload_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // a real database/sql driver for the rows

	"qshare/store/jsonload"
)

type record struct {
	N     int    `json:"n"`
	Extra string `json:"-"`
}

// query runs q on a fresh in-memory SQLite database.
func query(t *testing.T, q string) *sql.Rows {
	t.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	rows, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rows.Close() })
	return rows
}

// series selects n rows 1..n, as JSON records and, second, as text.
func series(n int) string {
	return fmt.Sprintf(`WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < %d)
		SELECT '{"n":' || i || '}', 'x' || i FROM s ORDER BY i`, n)
}

// TestDecodeInOrder: records come back in row order across many chunks,
// with and without the second column.
func TestDecodeInOrder(t *testing.T) {
	for _, n := range []int{1, 255, 256, 257, 1000} {
		got, err := jsonload.Decode(query(t, series(n)), func(r *record, x string) { r.Extra = x })
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("%d records, want %d", len(got), n)
		}
		for i, r := range got {
			if r.N != i+1 || r.Extra != fmt.Sprint("x", i+1) {
				t.Fatalf("n=%d: record %d is %+v", n, i, r)
			}
		}
	}
	one := strings.Replace(series(300), `, 'x' || i`, "", 1)
	got, err := jsonload.Decode[record, string](query(t, one), nil)
	if err != nil || len(got) != 300 || got[299].N != 300 || got[0].Extra != "" {
		t.Fatalf("one column: %d records, %v", len(got), err)
	}
}

// TestDecodeEmpty: no rows give nil.
func TestDecodeEmpty(t *testing.T) {
	got, err := jsonload.Decode[record, string](query(t, `SELECT '{}' WHERE 0`), nil)
	if err != nil || got != nil {
		t.Fatalf("got %v, %v; want nil, nil", got, err)
	}
}

// TestDecodeNamesTheBadRecord: a record that does not decode fails the
// whole decode, named by its position, wherever its chunk is.
func TestDecodeNamesTheBadRecord(t *testing.T) {
	q := `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM s WHERE i < 600)
		SELECT CASE WHEN i = 513 THEN '{"n":"not a number"}' ELSE '{"n":' || i || '}' END FROM s ORDER BY i`
	got, err := jsonload.Decode[record, string](query(t, q), nil)
	if err == nil || !strings.HasPrefix(err.Error(), "decode record 513: ") || got != nil {
		t.Fatalf("got %d records, %v; want the error of record 513", len(got), err)
	}
}

// TestDecodeScanError: a row that does not scan (a NULL second column into
// a string) fails with the driver's error.
func TestDecodeScanError(t *testing.T) {
	_, err := jsonload.Decode(query(t, `SELECT '{"n":1}', NULL`), func(r *record, x string) { r.Extra = x })
	if err == nil {
		t.Fatal("a NULL scanned into a string")
	}
}
