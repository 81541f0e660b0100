package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"qshare/daemon"
	"qshare/datadir"
	"qshare/event"
	"qshare/postgres"
	"qshare/sqlite"
	"qshare/store"
)

// The store and the event log of qshare serve: which backend, chosen by URL.

// stores is the registry of the stores qshare serve --store can open, by URL
// scheme. Adding a backend is one Register line here; the daemon only ever
// sees a store.Store.
var stores = newStoreRegistry()

func newStoreRegistry() *store.Registry {
	r := &store.Registry{}
	r.Register(sqlite.Scheme, sqlite.OpenURL)
	r.Register(postgres.Scheme, postgres.OpenURL)
	r.Register(postgres.SchemeLong, postgres.OpenURL)
	return r
}

// eventsInStore is the --events value that asks for the store's own event
// log (a file of that name is ./store).
const eventsInStore = "store"

// openServeStore opens the store that s names: --store, or by default the
// SQLite database qshare.db in the data directory. It returns the store and
// its URL, without any password, for messages.
func openServeStore(ctx context.Context, s Settings) (store.Store, string, error) {
	raw := s.Store
	if raw == "" {
		var err error
		if raw, err = sqlite.URL(datadir.StorePath(s.DataDir)); err != nil {
			return nil, "", fmt.Errorf("--data-dir %q: %w", s.DataDir, err)
		}
	}
	name := raw
	if u, err := url.Parse(raw); err == nil {
		name = store.RedactURL(u)
	}
	st, err := stores.Open(ctx, raw)
	if err != nil {
		if s.Store != "" {
			return nil, "", fmt.Errorf("--store: %w", err)
		}
		return nil, "", err
	}
	return st, name, nil
}

// storeNote is what the listening line adds about the store: nothing for
// the default one in the data directory, which the line already names.
func storeNote(s Settings, name string) string {
	if s.Store == "" {
		return ""
	}
	return ", store " + name
}

// serveEvents returns the event sink that --events names, and the function
// that closes it: none (""), the store's own log ("store", when the store
// implements store.EventSink), or a file.
func serveEvents(s Settings, st store.Store, storeName string) (daemon.EventSink, func() error, error) {
	none := func() error { return nil }
	switch s.Events {
	case "":
		return nil, none, nil
	case eventsInStore:
		es, ok := st.(store.EventSink)
		if !ok {
			return nil, none, errors.New("--events store: the store " + storeName + " keeps no event log; give a file instead, for example --events events.jsonl")
		}
		return es, none, nil // closed with the store
	}
	f, err := event.OpenFile(s.Events)
	if err != nil {
		return nil, none, err
	}
	return f, f.Close, nil
}
