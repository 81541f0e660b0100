//go:build unix

package sqlite_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare"
	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
)

// The crash test runs the test binary again as a child process that commits
// in a loop from several goroutines and prints "ack G I" once the commit of
// change I of goroutine G has returned nil. The parent kills the child with
// SIGKILL at a random moment, opens the database again and checks that every
// acknowledged change is there. The child's part is TestCrashChild, which
// does nothing unless the environment variable below names a database.
const crashChildEnv = "QSHARE_SQLITE_CRASH_CHILD_DB"

func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("run by TestCrash as its child process")
	}
	d, err := sqlite.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: open:", err)
		os.Exit(2)
	}
	start, _ := strconv.Atoi(os.Getenv(crashChildEnv + "_START"))
	var out sync.Mutex
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := start; ; i++ {
				j := crashJob(g, i)
				// Each change puts a job and moves the goroutine's marker
				// queue forward, so the check sees updates as well as inserts.
				c := &store.Change{
					PutJobs:   []qshare.Job{j},
					PutQueues: []qshare.JobQueue{{Name: fmt.Sprint("marker-", g), Priority: i}},
				}
				if i%7 == 3 {
					c.DeleteJobs = []string{crashJob(g, i-1).ID}
				}
				if err := d.Commit(context.Background(), c); err != nil {
					fmt.Fprintln(os.Stderr, "child: commit:", err)
					os.Exit(3)
				}
				out.Lock()
				fmt.Fprintf(os.Stdout, "ack %d %d\n", g, i) // unbuffered: one write per ack
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

func crashJob(g, i int) qshare.Job {
	id := fmt.Sprintf("g%02d-%07d", g, i)
	return qshare.Job{
		ID: id, Name: id, JobQueue: "q", Status: qshare.JobSubmitted, Version: 1,
		Payload:   strings.Repeat("x", 200),
		CreatedAt: time.Unix(int64(i), int64(g)).UTC(),
	}
}

func TestCrash(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	path := filepath.Join(t.TempDir(), "qshare.db")
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	acked := map[[2]int]bool{}
	start := 0
	for round := range 4 {
		cmd, stdout, stderr := storetest.StartChild(t, "^TestCrashChild$", crashChildEnv+"="+path, fmt.Sprintf("%s_START=%d", crashChildEnv, start))
		// Kill it at a random moment after it has acknowledged something.
		got := storetest.KillMidway(t, cmd, stdout, stderr, time.Duration(50+r.IntN(400))*time.Millisecond)
		maxI := start
		for _, l := range got {
			var g, i int
			if _, err := fmt.Sscanf(l, "ack %d %d", &g, &i); err != nil {
				t.Fatalf("round %d: bad line from the child: %q", round, l)
			}
			acked[[2]int{g, i}] = true
			maxI = max(maxI, i)
		}
		t.Logf("round %d: killed the child after %d acknowledged commits", round, len(got))

		d, err := sqlite.Open(path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill -9: %v", round, err)
		}
		st, err := d.Load(context.Background())
		if err != nil {
			t.Fatalf("round %d: load after kill -9: %v", round, err)
		}
		jobs := storetest.JobIDs(st.Jobs)
		marker := map[string]int{}
		for _, q := range st.Queues {
			marker[q.Name] = q.Priority
		}
		lost := 0
		for k := range acked {
			g, i := k[0], k[1]
			m, ok := marker[fmt.Sprint("marker-", g)]
			// Change i+1 deletes job i when (i+1)%7 == 3; the marker, written
			// in the same change, says whether it was committed.
			deletedLater := (i+1)%7 == 3 && m >= i+1
			if !jobs[crashJob(g, i).ID] && !deletedLater {
				lost++
				if lost <= 5 {
					t.Errorf("round %d: acknowledged job %s is missing", round, crashJob(g, i).ID)
				}
			}
			if !ok || m < i {
				t.Errorf("round %d: marker of goroutine %d is at %d (present %v), but change %d was acknowledged", round, g, m, ok, i)
			}
		}
		if lost > 0 {
			t.Fatalf("round %d: %d acknowledged commits lost", round, lost)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		start = maxI + 1_000 // the next child writes new keys
	}
}
