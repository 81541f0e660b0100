package event_test

import (
	"path/filepath"
	"testing"

	"qshare/event"
	"qshare/store"
	"qshare/store/storetest"
)

var _ store.EventSink = (*event.File)(nil)

// TestFileSink runs the event sink checks, the ones every store that keeps
// the event log must also pass, on the file sink of qshare serve --events.
func TestFileSink(t *testing.T) {
	storetest.RunEventSink(t,
		func(t *testing.T) string { return filepath.Join(t.TempDir(), "events.jsonl") },
		func(loc string) (store.EventSink, func() error, error) {
			f, err := event.OpenFile(loc)
			if err != nil {
				return nil, nil, err
			}
			return f, f.Close, nil
		})
}
