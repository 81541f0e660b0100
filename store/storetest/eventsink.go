package storetest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"qshare/event"
	"qshare/store"
)

// The event sink checks: the contract of store.EventSink (the daemon's
// daemon.EventSink), for the file sink (event.File) and for every Store that
// keeps the event log.

// sinkEnv names, in a child process started by the sink's crash check, the
// location of the log the child appends to until it is killed.
const sinkEnv = "QSHARE_STORETEST_SINK"

// SinkOpener opens the event log at a location and returns it with the
// function that closes it (for a Store, the Store's Close). On error it
// returns nil functions.
type SinkOpener func(location string) (sink store.EventSink, close func() error, err error)

// RunEventSink checks an event sink. newLocation returns the location of a
// new, empty log for one test; open opens the log at a location, and is
// called again on the same location after the suite closed it (the events
// must still be there) and in a child process that the suite kills (every
// batch whose Append returned nil must be there afterwards). The test that
// calls RunEventSink, directly or through Run, must do nothing before it
// that its child should not do.
func RunEventSink(t *testing.T, newLocation func(t *testing.T) string, open SinkOpener) {
	if loc := os.Getenv(sinkEnv); loc != "" {
		t.Run("Crash", func(t *testing.T) { sinkChild(loc, open) })
		return
	}
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, loc string, open SinkOpener)
	}{
		{"Empty", testSinkEmpty},
		{"AppendInOrder", testSinkOrder},
		{"EveryField", testSinkFields},
		{"Reopen", testSinkReopen},
		{"LargeBatch", testSinkLarge},
		{"Closed", testSinkClosed},
		{"Crash", testSinkCrash},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newLocation(t), open) })
	}
}

// openSink opens loc, failing t on error, and closes it when t ends.
func openSink(t *testing.T, open SinkOpener, loc string) (store.EventSink, func() error) {
	t.Helper()
	s, closeFn, err := open(loc)
	if err != nil {
		t.Fatalf("open %s: %v", loc, err)
	}
	t.Cleanup(func() { closeFn() }) //nolint:errcheck // a second Close; the tests check the first
	return s, closeFn
}

// readAll returns every event of s, failing t on error.
func readAll(t *testing.T, s store.EventSink) []event.Event {
	t.Helper()
	var out []event.Event
	if err := s.Events(func(e event.Event) { out = append(out, e) }); err != nil {
		t.Fatalf("Events: %v", err)
	}
	return out
}

// sameEvents fails t when got is not want, event for event.
func sameEvents(t *testing.T, what string, got, want []event.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: the log holds %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Fatalf("%s: event %d is\n%+v\nwant\n%+v", what, i, got[i], want[i])
		}
	}
}

// seqEvent is event i of a deterministic sequence, with every field set on
// some of them.
func seqEvent(i int) event.Event {
	kinds := []event.Kind{event.Submit, event.Start, event.Stopping, event.Preempt, event.Finish, event.Fail, event.Priority}
	e := event.Event{
		T:            1.7e9 + float64(i)/8,
		Job:          fmt.Sprintf("job-%06d", i),
		Event:        kinds[i%len(kinds)],
		Share:        fmt.Sprint("share-", i%5),
		Queue:        "q",
		InstanceType: "ml.g5.xlarge",
		Instances:    int64(i % 9),
		Priority:     i % 7,
	}
	if i%3 == 0 {
		e.Reason = fmt.Sprint("reason ", i)
	}
	if e.Event == event.Preempt || e.Event == event.Stopping {
		e.For = fmt.Sprintf("job-%06d", i+1)
	}
	return e
}

func seq(from, to int) []event.Event {
	out := make([]event.Event, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, seqEvent(i))
	}
	return out
}

func testSinkEmpty(t *testing.T, loc string, open SinkOpener) {
	s, _ := openSink(t, open, loc)
	sameEvents(t, "a new log", readAll(t, s), nil)
	for _, b := range [][]event.Event{nil, {}} {
		if err := s.Append(b); err != nil {
			t.Fatalf("Append of an empty batch: %v", err)
		}
	}
	sameEvents(t, "after empty batches", readAll(t, s), nil)
}

func testSinkOrder(t *testing.T, loc string, open SinkOpener) {
	s, _ := openSink(t, open, loc)
	var want []event.Event
	n := 0
	for _, size := range []int{1, 3, 2, 7, 1} {
		b := seq(n, n+size)
		n += size
		if err := s.Append(b); err != nil {
			t.Fatalf("Append: %v", err)
		}
		want = append(want, b...)
		sameEvents(t, "after an append", readAll(t, s), want)
	}
	// The sink must not keep the caller's slice: the daemon reuses nothing,
	// but a sink that aliases it would change the log behind its back.
	b := seq(n, n+2)
	if err := s.Append(b); err != nil {
		t.Fatalf("Append: %v", err)
	}
	want = append(want, seq(n, n+2)...)
	b[0].Job, b[1].Reason = "changed", "changed"
	sameEvents(t, "after the caller changed its slice", readAll(t, s), want)
}

func testSinkFields(t *testing.T, loc string, open SinkOpener) {
	s, closeFn := openSink(t, open, loc)
	b := []event.Event{
		{T: 0, Job: "j", Event: event.Submit},
		{T: 1776000000.123456789, Job: "job \"quoted\" \\ é", Event: event.Start, Share: "s\tt", Queue: "q\nr", InstanceType: "ml.p4d.24xlarge", Instances: 1 << 40, Priority: -3, Reason: "line\nbreak \u2028 <&> \x01", For: "k"},
		{T: 5e-324, Job: "x", Event: event.Stopping, Instances: 0, Priority: 1 << 30, For: "y"},
		{T: 1e21, Job: "z", Event: event.Fail, Reason: strings.Repeat("r", 10000)},
	}
	if err := s.Append(b); err != nil {
		t.Fatalf("Append: %v", err)
	}
	sameEvents(t, "events with every field", readAll(t, s), b)
	if err := closeFn(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s, _ = openSink(t, open, loc)
	sameEvents(t, "events with every field, reopened", readAll(t, s), b)
}

func testSinkReopen(t *testing.T, loc string, open SinkOpener) {
	var want []event.Event
	for round := range 3 {
		s, closeFn := openSink(t, open, loc)
		sameEvents(t, fmt.Sprint("reopened, round ", round), readAll(t, s), want)
		b := seq(round*10, round*10+4)
		if err := s.Append(b); err != nil {
			t.Fatalf("Append: %v", err)
		}
		want = append(want, b...)
		if err := closeFn(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	s, _ := openSink(t, open, loc)
	sameEvents(t, "reopened at the end", readAll(t, s), want)
}

func testSinkLarge(t *testing.T, loc string, open SinkOpener) {
	s, _ := openSink(t, open, loc)
	b := seq(0, 20_000)
	if err := s.Append(b); err != nil {
		t.Fatalf("Append of %d events: %v", len(b), err)
	}
	sameEvents(t, "one large batch", readAll(t, s), b)
}

func testSinkClosed(t *testing.T, loc string, open SinkOpener) {
	s, closeFn := openSink(t, open, loc)
	if err := s.Append(seq(0, 1)); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := closeFn(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Append(seq(1, 2)); err == nil {
		t.Fatal("Append after Close succeeded")
	}
	s, _ = openSink(t, open, loc)
	sameEvents(t, "after an Append on the closed log", readAll(t, s), seq(0, 1))
}

// sinkChild appends batches of the sequence to the log at loc, printing
// "ack N" once the first N events are appended, until it is killed.
func sinkChild(loc string, open SinkOpener) {
	s, _, err := open(loc)
	if err != nil {
		fmt.Fprintln(os.Stderr, "storetest child: open:", err)
		os.Exit(2)
	}
	n := 0
	deadline := time.Now().Add(time.Minute) // the parent kills it long before
	for k := 0; time.Now().Before(deadline); k++ {
		size := 1 + k%4
		if err := s.Append(seq(n, n+size)); err != nil {
			fmt.Fprintln(os.Stderr, "storetest child: append:", err)
			os.Exit(3)
		}
		n += size
		fmt.Fprintf(os.Stdout, "ack %d\n", n) // unbuffered: one write per ack
	}
	os.Exit(4)
}

// testSinkCrash kills a child that appends, at a random moment, and checks
// that the log is a prefix of what the child appended that holds every
// acknowledged batch; then that appending goes on after it.
func testSinkCrash(t *testing.T, loc string, open SinkOpener) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	cmd, stdout, stderr := StartChild(t, runPattern(t.Name()), sinkEnv+"="+loc)
	acked := 0
	for _, l := range KillMidway(t, cmd, stdout, stderr, time.Duration(20+rand.IntN(200))*time.Millisecond) {
		var n int
		if _, err := fmt.Sscanf(l, "ack %d", &n); err == nil {
			acked = n
		}
	}

	var s store.EventSink
	var closeFn func() error
	err := retryLocked(func() (err error) {
		s, closeFn, err = open(loc)
		return err
	})
	if err != nil {
		t.Fatalf("open %s after the child was killed: %v", loc, err)
	}
	t.Cleanup(func() { closeFn() }) //nolint:errcheck // a second Close
	got := readAll(t, s)
	t.Logf("killed the child after %d acknowledged events; the log holds %d", acked, len(got))
	if len(got) < acked {
		t.Fatalf("the log holds %d events, but the child's appends of %d had returned", len(got), acked)
	}
	sameEvents(t, "after the crash", got, seq(0, len(got)))
	more := seq(len(got), len(got)+3)
	if err := s.Append(more); err != nil {
		t.Fatalf("Append after the crash: %v", err)
	}
	sameEvents(t, "appended after the crash", readAll(t, s), seq(0, len(got)+3))
}
