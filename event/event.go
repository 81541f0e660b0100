// Package event is qshare's capacity event log: one JSON object a line, one
// line each time a job takes or gives back capacity (and when it is
// submitted, fails, or has its priority changed), in the order it happened.
//
// The simulator writes it (`qshare simulate --events`), the server appends it
// (`qshare serve --events`), and the checker here replays it against a
// configuration to prove, from the log alone, that the engine kept its
// guarantees (`qshare check-events`, and the test suites).
//
// A line looks like
//
//	{"t":12.5,"job":"j1","event":"start","share":"QS1","queue":"training","instance_type":"ml.g5.xlarge","instances":1,"priority":3,"reason":"borrowed 1 ml.g5.xlarge from QS2"}
//
// A job with several instance types has one line per type, consecutive and
// with the same t. `start` is written when the capacity is taken; `preempt`,
// `finish` and `fail` when it is given back. A `fail` of a job that holds
// nothing has "instances": 0. A `preempt` names in "for" the job it made
// room for.
//
// A preemption is decided some time before its capacity is given back when
// the victim has a grace period to stop. The decision is a `stopping` line
// (with "for", and the capacity the victim holds and will give back), which
// takes and gives back nothing; the checker judges the preemption's
// legitimacy there, against the state the engine decided on. A `fail` of a
// job that then starts again is a failed attempt that was retried (or a
// lost attempt, requeued): a `fail` is final only if no later `start` of
// the job follows.
package event

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"qshare"
)

// Kind is what happened to a job.
type Kind string

// The kinds of event.
const (
	// Submit: the job joined its share's queue.
	Submit Kind = "submit"
	// Start: the job took its capacity.
	Start Kind = "start"
	// Preempt: a preempted job gave its capacity back.
	Preempt Kind = "preempt"
	// Finish: a job that ended on its own gave its capacity back.
	Finish Kind = "finish"
	// Fail: the job failed for good; it gives back what it held (maybe nothing).
	Fail Kind = "fail"
	// Priority: the job's schedulingPriority changed to Priority.
	Priority Kind = "priority"
	// Stopping: the job was chosen as a preemption victim (for the job in
	// For) and is stopping; it still holds its capacity until its preempt.
	Stopping Kind = "stopping"
	// Lead: a server began to lead at T. It writes it first, after only
	// the submits it reconciles; only a server's log has it, and it names
	// no job. Until then no server scheduled: a server that stopped
	// leading (killed, or its store session cut) may have left a head job
	// that fitted waiting for the next one, so a head's wait counts from
	// here.
	Lead Kind = "lead"
)

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool {
	switch k {
	case Submit, Start, Preempt, Finish, Fail, Priority, Stopping, Lead:
		return true
	}
	return false
}

// Event is one line of the log.
type Event struct {
	// T is the time in seconds: since the start of a simulation, or since
	// the Unix epoch in a server's log.
	T            float64 `json:"t"`
	Job          string  `json:"job"`
	Event        Kind    `json:"event"`
	Share        string  `json:"share"`
	Queue        string  `json:"queue"`
	InstanceType string  `json:"instance_type"`
	Instances    int64   `json:"instances"`
	Priority     int     `json:"priority"`
	Reason       string  `json:"reason,omitempty"`
	// For is, on a preempt or stopping, the job the preemption makes room for.
	For string `json:"for,omitempty"`
	// Plan is, on a submit, the ARN of the capacity plan the job runs on
	// (its payload's ResourceConfig.TrainingPlanArn), if any.
	Plan string `json:"plan,omitempty"`
}

// Lines returns the events that record one change of a job's capacity: one
// per instance type of demand, in type order (one with InstanceType "" and
// Instances 0 for an empty demand). base carries every other field.
func Lines(base Event, demand qshare.Capacity) []Event {
	types := demand.Types()
	if len(types) == 0 {
		base.InstanceType, base.Instances = "", 0
		return []Event{base}
	}
	out := make([]Event, len(types))
	for i, t := range types {
		out[i] = base
		out[i].InstanceType, out[i].Instances = t, demand[t]
	}
	return out
}

// Writer writes events as JSON lines. It buffers: call Flush at the end.
// The encoding is fixed (field order, number format), so the same events
// give the same bytes.
type Writer struct {
	w   *bufio.Writer
	buf []byte
	err error
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriterSize(w, 64<<10)} }

// Write writes one event. Errors are sticky: after one, Write and Flush
// return it.
func (w *Writer) Write(e Event) error {
	if w.err != nil {
		return w.err
	}
	w.buf = Append(w.buf[:0], e)
	w.buf = append(w.buf, '\n')
	_, w.err = w.w.Write(w.buf)
	return w.err
}

// Flush writes any buffered lines.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	w.err = w.w.Flush()
	return w.err
}

// Append appends e as one JSON object (no newline) to b. It encodes exactly
// as encoding/json would decode back, with t in the shortest decimal form.
func Append(b []byte, e Event) []byte {
	b = append(b, `{"t":`...)
	b = appendFloat(b, e.T)
	b = append(b, `,"job":`...)
	b = appendString(b, e.Job)
	b = append(b, `,"event":`...)
	b = appendString(b, string(e.Event))
	b = append(b, `,"share":`...)
	b = appendString(b, e.Share)
	b = append(b, `,"queue":`...)
	b = appendString(b, e.Queue)
	b = append(b, `,"instance_type":`...)
	b = appendString(b, e.InstanceType)
	b = append(b, `,"instances":`...)
	b = strconv.AppendInt(b, e.Instances, 10)
	b = append(b, `,"priority":`...)
	b = strconv.AppendInt(b, int64(e.Priority), 10)
	if e.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, e.Reason)
	}
	if e.For != "" {
		b = append(b, `,"for":`...)
		b = appendString(b, e.For)
	}
	if e.Plan != "" {
		b = append(b, `,"plan":`...)
		b = appendString(b, e.Plan)
	}
	return append(b, '}')
}

func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	return strconv.AppendFloat(b, f, 'f', -1, 64)
}

const hex = "0123456789abcdef"

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// LineError is a line that is not an event. A Reader that returned one can
// go on reading the lines after it.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns the reason the line could not be read.
func (e *LineError) Unwrap() error { return e.Err }

// Reader reads events from JSON lines. Blank lines are skipped; unknown
// fields are ignored, so that a newer writer's log still reads.
type Reader struct {
	s    *bufio.Scanner
	line int
}

// NewReader returns a Reader on r.
func NewReader(r io.Reader) *Reader {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 64<<10), 16<<20)
	return &Reader{s: s}
}

// Line returns the line number of the event Read returned last.
func (r *Reader) Line() int { return r.line }

// Read returns the next event, or io.EOF after the last. An unreadable line
// is a *LineError, after which Read goes on with the next line; any other
// error (the input failed, a line over 16 MiB) ends the reading.
func (r *Reader) Read() (Event, error) {
	for r.s.Scan() {
		r.line++
		b := r.s.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(b, &e); err != nil {
			return Event{}, &LineError{r.line, fmt.Errorf("not an event: %v", err)}
		}
		if !e.Event.Valid() {
			return Event{}, &LineError{r.line, fmt.Errorf("unknown event %q: use submit, start, stopping, preempt, finish, fail, priority or lead", e.Event)}
		}
		if e.Job == "" && e.Event != Lead {
			return Event{}, &LineError{r.line, errors.New("the event names no job")}
		}
		return e, nil
	}
	if err := r.s.Err(); err != nil {
		return Event{}, fmt.Errorf("line %d: %w", r.line+1, err)
	}
	return Event{}, io.EOF
}

// ReadAll reads r to the end and returns its events. The first line that is
// not an event (a *LineError) or a failure of r ends the reading: ReadAll
// returns the events before it and that error.
func ReadAll(r io.Reader) ([]Event, error) {
	rd := NewReader(r)
	var out []Event
	for {
		e, err := rd.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, e)
	}
}

// each reads to the end: it calls fn with every event and its line
// number, and bad with every line that is not one (reading goes on after
// it). It returns the error that ended the reading early, if any.
func (r *Reader) each(fn func(e Event, line int), bad func(*LineError)) error {
	for {
		e, err := r.Read()
		if err == io.EOF {
			return nil
		}
		var le *LineError
		if errors.As(err, &le) {
			bad(le)
			continue
		}
		if err != nil {
			return err
		}
		fn(e, r.line)
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
