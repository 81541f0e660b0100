package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"qshare"
	"qshare/sqlite"
	"qshare/store"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "qshare-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	db, err := sqlite.Open(filepath.Join(dir, "qshare.db"))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// A submit: durable once Commit returns nil.
	err = db.Commit(ctx, &store.Change{PutJobs: []qshare.Job{
		{ID: "b", JobQueue: "q", Status: qshare.JobSubmitted, CreatedAt: now, Version: 1},
		{ID: "a", JobQueue: "q", Status: qshare.JobSubmitted, CreatedAt: now, Version: 1},
	}})
	if err != nil {
		panic(err)
	}
	db.Close()

	// After a restart, the state comes back, jobs in CreatedAt then ID order.
	db, err = sqlite.Open(filepath.Join(dir, "qshare.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	st, err := db.Load(ctx)
	if err != nil {
		panic(err)
	}
	for _, j := range st.Jobs {
		fmt.Println(j.ID, j.Status, j.CreatedAt.Format(time.RFC3339))
	}
	// Output:
	// a SUBMITTED 2026-01-02T03:04:05Z
	// b SUBMITTED 2026-01-02T03:04:05Z
}
