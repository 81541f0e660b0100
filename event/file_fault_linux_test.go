package event_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"qshare/event"
	"qshare/internal/childtest"
)

// TestFileWriteFails makes the file sink's writes fail part-way for real,
// the way a full disk does, by lowering the file size limit (RLIMIT_FSIZE)
// in a child process: a batch that is partly written is cut off again, so
// the log keeps only whole batches, and appending works again once there is
// room.
func TestFileWriteFails(t *testing.T) {
	childtest.Run(t, "TestFileWriteFailsChild", fileFullEnv, filepath.Join(t.TempDir(), "events.jsonl"))
}

const fileFullEnv = "QSHARE_EVENT_FILE_FULL_CHILD"

func TestFileWriteFailsChild(t *testing.T) {
	path := childtest.Arg(t, fileFullEnv, "TestFileWriteFails")
	batch := func(from, n int) []event.Event {
		var out []event.Event
		for i := from; i < from+n; i++ {
			out = append(out, event.Event{T: float64(i), Job: fmt.Sprintf("job-%04d", i), Event: event.Submit, Share: "s", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 1})
		}
		return out
	}
	read := func(f *event.File) []event.Event {
		var got []event.Event
		if err := f.Events(func(e event.Event) { got = append(got, e) }); err != nil {
			t.Fatalf("Events: %v", err)
		}
		return got
	}
	f, err := event.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := batch(0, 3)
	if err := f.Append(want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	restore := childtest.SetFileSizeLimit(t, uint64(fi.Size()+1000)) // room for a few lines, not for 50
	if err := f.Append(batch(3, 50)); err == nil {
		t.Fatal("an Append past the file size limit succeeded")
	} else {
		t.Logf("Append past the limit: %v", err)
	}
	if fi2, err := os.Stat(path); err != nil || fi2.Size() != fi.Size() {
		t.Fatalf("after the failed Append the file is %v bytes (%v), want %d: the partial batch was not cut off", fi2.Size(), err, fi.Size())
	}
	if got := read(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the failed Append the log holds %d events, want %d", len(got), len(want))
	}
	// A batch that fits goes after the whole ones.
	want = append(want, batch(100, 1)...)
	if err := f.Append(batch(100, 1)); err != nil {
		t.Fatalf("a small Append within the limit: %v", err)
	}
	restore()
	want = append(want, batch(3, 50)...)
	if err := f.Append(batch(3, 50)); err != nil {
		t.Fatalf("the Append again, with room: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = event.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := read(f); !reflect.DeepEqual(got, want) {
		t.Fatalf("reopened, the log holds %d events, want %d:\n%+v", len(got), len(want), got)
	}
}
