package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"qshare/auth"
	"qshare/daemon"
	"qshare/metrics"
	"qshare/periodic"
	"qshare/postgres"
	"qshare/store"
)

// The terms of qshare serve: one server leads a store at a time.
//
// On SQLite a server leads its store from start to end (a second server on
// the same file refuses to start). On PostgreSQL any number of servers may
// run on one store: the one whose store holds the advisory lock is the
// leader (postgres/leader.go) and runs the daemon, its executor and its
// commits; the others are standbys, which wait in PostgreSQL's lock queue,
// answer /readyz with 503 and forward every API request to the leader, at
// the address the leader recorded in the store. When the leader's session
// ends (it died, its connection was cut, it stopped renewing its lease),
// PostgreSQL grants the lock to one standby, which loads the store,
// recovers the attempts through its own executor and leads. A leader whose
// store says it was deposed steps down: it stops its daemon and executor,
// throws away everything it held in memory, and waits as a standby again.
// Every change of role is logged ("leadership: ...").

// defaultLeaderLease is --leader-lease's default.
const defaultLeaderLease = "5s"

// forwardedHeader marks a request a standby forwarded, so that a standby
// never forwards one again (two standbys that both believe the other
// leads).
const forwardedHeader = "X-Qshare-Forwarded-By"

// server is one qshare serve process: its settings, its HTTP server, and
// the handler of its current term (leading, or standing by).
type server struct {
	s         Settings
	log       *slog.Logger
	grace     time.Duration
	retention time.Duration
	execs     []namedExecutor // the executors (executors.go)
	tls       *tls.Config
	stdout    io.Writer

	health   *metrics.Health
	router   *Router
	addr     string // the listen address
	serve    func() // starts serving, once
	shutdown func() // stops serving, once

	// owner proves, when the server leads a PostgreSQL store, that it
	// still owns it (readyz); nil otherwise.
	owner   atomic.Pointer[postgres.DB]
	proveMu sync.Mutex
	proved  time.Time // when owner last proved it
}

// readyz is the readiness probe: next, except that a leader on PostgreSQL
// first proves that it still owns the store, with a fence-only commit (at
// most one each 100 ms), so that a leader deposed without knowing it yet
// (its session was cut a moment ago) is not ready, and steps down.
func (sv *server) readyz(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if db := sv.owner.Load(); db != nil {
			if ok, _ := sv.health.Ready(); ok {
				if err := sv.prove(r.Context(), db); err != nil {
					w.Header().Set("Content-Type", "text/plain; charset=utf-8")
					w.Header().Set("Cache-Control", "no-store")
					w.WriteHeader(http.StatusServiceUnavailable)
					fmt.Fprintln(w, "not ready: this server could not prove that it still leads the store")
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// prove commits a heartbeat on db, unless one succeeded within 100 ms.
func (sv *server) prove(ctx context.Context, db *postgres.DB) error {
	sv.proveMu.Lock()
	defer sv.proveMu.Unlock()
	if time.Since(sv.proved) < 100*time.Millisecond {
		return db.DeposedErr()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := db.Heartbeat(ctx); err != nil {
		return err
	}
	sv.proved = time.Now()
	return nil
}

// readTimeout and writeTimeout bound the reading of a request and the
// writing of its answer; the embedded S3 store's route moves them at each
// read and write of an object instead (s3.go).
const (
	readTimeout  = 30 * time.Second
	writeTimeout = 60 * time.Second
)

// run serves on ln until ctx ends or the HTTP server fails.
func (sv *server) run(ctx context.Context, ln net.Listener, guard *auth.Guard, ready func(addr string)) error {
	sv.addr = ln.Addr().String()
	// The AWS Batch API at /v1/, and every other route but the probes,
	// wait (503) until the store is loaded and recovered; on a standby
	// they go to the leader. The probes answer at once, behind the same
	// guard.
	sv.health = metrics.NewHealth("loading the store and recovering the attempts in flight")
	sv.routes(ctx, sv.router)
	sv.router.serveOthers(sv.health.Gate(http.NotFoundHandler()))
	srv := &http.Server{
		Handler:     sv.router.handler(guard),
		ConnContext: guard.ConnContext,
		// A client has 5 s to send its headers, and a keep-alive
		// connection is closed after 60 s idle (and after 1,000 requests:
		// auth.Guard), so that slow or idle connections do not hold the
		// descriptors that the connection limits count.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(sv.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	// Serving begins once the first term's handler is in place (lead), or
	// when the server stands by: as before, a server that fails to open
	// its store never answered a request.
	var once sync.Once
	sv.serve = func() { once.Do(func() { go func() { errc <- serveOn(srv, ln, sv.tls) }() }) }
	// shutdown drains the HTTP server; a term is closed after it, so that
	// the requests in flight are answered by a daemon that still runs.
	var downOnce sync.Once
	sv.shutdown = func() {
		downOnce.Do(func() {
			sv.log.Info("shutting down")
			sv.health.SetNotReady("shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := srv.Shutdown(sctx); err != nil {
				sv.log.Warn("shutdown", "err", err)
			}
		})
	}
	defer sv.shutdown()
	if u, ok := postgres.StoreURL(sv.s.Store); ok {
		return sv.runPostgres(ctx, u, errc, ready)
	}
	db, storeName, err := openServeStore(ctx, sv.s)
	if err != nil {
		return err
	}
	t, err := sv.lead(ctx, db, storeName)
	if err != nil {
		return err
	}
	sv.listening(storeName, "", ready)
	select {
	case err := <-errc:
		t.close()
		return fmt.Errorf("server stopped: %w", err)
	case <-ctx.Done():
	}
	sv.shutdown()
	t.close()
	return nil
}

// listening prints the listening line (which serveproc and people wait
// for) and logs that the server serves.
func (sv *server) listening(storeName, role string, ready func(addr string)) {
	fmt.Fprintf(sv.stdout, "qshare: listening on %s://%s (%s, data in %s%s%s)\n", scheme(sv.tls), sv.addr, executorsNote(sv.execs), sv.s.DataDir, storeNote(sv.s, storeName), role)
	if ready != nil {
		ready(sv.addr)
	}
	sv.log.Info("serving", "addr", sv.addr, "executors", executorsNote(sv.execs), "dataDir", sv.s.DataDir, "store", storeName, "region", sv.s.Region, "account", sv.s.AccountID)
}

// term is one term as the leader: the daemon, its executor and event log
// on the store, and the handler that serves them.
type term struct {
	close func()
}

// lead runs a term on db, which this server now owns: it builds the
// daemon, makes its handler the current one, loads the store and recovers
// the attempts, and then says it is ready. On error everything it opened,
// db included, is closed.
func (sv *server) lead(ctx context.Context, db store.Store, storeName string) (*term, error) {
	s, log := sv.s, sv.log
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]() //nolint:errcheck // closing on the way out
		}
	}
	closers = append(closers, db.Close)
	events, closeEvents, err := serveEvents(s, db, storeName)
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, closeEvents)
	set, err := newExecutorSet(ctx, sv.execs, sv.addr, sv.grace, log)
	if err != nil {
		closeAll()
		return nil, err
	}
	closers = append(closers, set.Close)
	requireRunAs := false
	for _, n := range sv.execs {
		requireRunAs = requireRunAs || runsAsPrincipals(n.s)
	}
	cfg := daemon.Config{Store: db, Executors: set, Region: s.Region, AccountID: s.AccountID,
		MaxSharesPerQueue: s.MaxSharesPerQueue, Logger: log, StopGrace: sv.grace, Events: events, JobRetention: sv.retention,
		RequireRunAs: requireRunAs}
	var m *metrics.Metrics
	if s.Metrics == "on" {
		m = metrics.New()
		cfg.Observer = m
	}
	d, err := daemon.New(cfg)
	if err != nil {
		closeAll()
		return nil, err
	}
	sv.health.SetNotReady("loading the store and recovering the attempts in flight")
	sv.router.lead(&Term{Daemon: d, Executor: set.ByAttempt(d.AttemptExecutor), Events: events, Metrics: m, Health: sv.health, Settings: s, Log: log})
	sv.serve()
	if err := d.Start(ctx); err != nil {
		closeAll()
		return nil, &takeoverError{err}
	}
	closers = append(closers, d.Close)
	sv.health.SetReady()
	return &term{close: closeAll}, nil
}

// runPostgres runs the server on a PostgreSQL store: leader or standby, in
// turns, until ctx ends.
func (sv *server) runPostgres(ctx context.Context, u *url.URL, errc <-chan error, ready func(addr string)) error {
	lease, err := time.ParseDuration(sv.s.LeaderLease)
	if err != nil || lease < time.Second {
		return fmt.Errorf("--leader-lease %q is not valid: give a duration of 1s or more, such as 5s", sv.s.LeaderLease)
	}
	advertise := sv.s.AdvertiseAddr
	if advertise == "" {
		advertise = scheme(sv.tls) + "://" + sv.addr
	}
	if a, err := url.Parse(advertise); err != nil || (a.Scheme != "http" && a.Scheme != "https") || a.Host == "" || a.Path != "" && a.Path != "/" {
		return fmt.Errorf("--advertise-addr %q is not valid: give the URL at which the other servers reach this one, such as http://10.0.0.5:8750", advertise)
	}
	opts := []postgres.Option{postgres.WithAdvertise(advertise), postgres.WithLease(lease)}
	name := store.RedactURL(u)
	wa, err := postgres.NewWatcher(ctx, u.String())
	if err != nil {
		return fmt.Errorf("--store: %w", err)
	}
	defer wa.Close()
	sb := &standby{log: sv.log, watcher: wa, self: advertise}
	sb.proxy = sb.newProxy()

	// The first try does not wait: a bad URL or an unreachable database
	// fails the start, as on SQLite; a store that another server leads
	// makes this one a standby.
	db, err := postgres.OpenURLOptions(ctx, u, opts...)
	if err != nil && !errors.Is(err, store.ErrLocked) {
		return fmt.Errorf("--store: %w", err)
	}
	printed := false
	for {
		if db == nil {
			// Not the store's name: /readyz answers unsigned, and the
			// URL is the operator's (the listening line and the log name it).
			sv.health.SetNotReady("standby: another server leads the store")
			sv.router.serveOthers(sb)
			sv.serve()
			stop := sb.watch(ctx)
			sv.log.Info("leadership: standby, waiting for the store's lock", "store", name, "leader", sb.leaderAddr())
			if !printed {
				sv.listening(name, ", standby", ready)
				printed = true
			}
			db, err = sv.waitForLock(ctx, u, opts, errc)
			stop()
			if err != nil || db == nil {
				return err
			}
		}
		sv.log.Info("leadership: this server leads the store", "store", name, "epoch", db.Epoch(), "advertise", advertise)
		t, err := sv.lead(ctx, db, name)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var te *takeoverError
			if !errors.As(err, &te) {
				return err // the settings: every term would fail so
			}
			// Loading or recovering failed (the database went away, say):
			// the store is closed, so another server may lead; this one
			// stands by again.
			sv.log.Warn("leadership: lost: taking the store over failed; standing by again", "store", name, "err", err)
			db = nil
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		sv.owner.Store(db)
		if !printed {
			sv.listening(name, ", leader", ready)
			printed = true
		}
		select {
		case err := <-errc:
			sv.owner.Store(nil)
			t.close()
			return fmt.Errorf("server stopped: %w", err)
		case <-ctx.Done():
			sv.owner.Store(nil)
			sv.shutdown()
			t.close()
			return nil
		case <-db.Deposed():
		}
		sv.log.Warn("leadership: lost: this server no longer owns the store; it stops acting on it and stands by", "store", name, "epoch", db.Epoch(), "why", db.DeposedErr())
		sv.health.SetNotReady("standby: stepping down")
		sv.owner.Store(nil)
		sb.leader.Store(nil)
		sb.refresh(ctx) // forward at once, while the term closes
		sv.router.serveOthers(sb)
		t.close()
		db = nil
	}
}

// takeoverError is a failure of the daemon's Start (loading the store,
// recovering the attempts), as opposed to one of the settings.
type takeoverError struct{ err error }

func (e *takeoverError) Error() string { return e.err.Error() }
func (e *takeoverError) Unwrap() error { return e.err }

// waitForLock opens the store WithWait, trying again while the database
// does not answer, until this server owns it or ctx ends.
func (sv *server) waitForLock(ctx context.Context, u *url.URL, opts []postgres.Option, errc <-chan error) (*postgres.DB, error) {
	opts = append(opts[:len(opts):len(opts)], postgres.WithWait())
	var last string
	for {
		db, err := postgres.OpenURLOptions(ctx, u, opts...)
		if err == nil {
			return db, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if msg := err.Error(); msg != last {
			sv.log.Warn("leadership: waiting for the store's lock failed; trying again", "err", err)
			last = msg
		}
		select {
		case err := <-errc:
			return nil, fmt.Errorf("server stopped: %w", err)
		case <-ctx.Done():
			return nil, nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// standby is the handler of a server that does not lead: it forwards each
// request to the leader, or, when no leader is known, answers 503 with a
// ServerException and Retry-After, which the AWS SDKs retry.
type standby struct {
	log     *slog.Logger
	watcher *postgres.Watcher
	self    string
	leader  atomic.Pointer[url.URL] // nil while no live leader is known
	proxy   *httputil.ReverseProxy
}

// watch reads the owner row now and every 250 ms, until the returned
// function is called.
func (sb *standby) watch(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	sb.refresh(ctx)
	go func() {
		defer close(done)
		periodic.Run(250*time.Millisecond, func() { sb.refresh(ctx) }, ctx.Done())
	}()
	return func() { cancel(); <-done }
}

// refresh reads who leads.
func (sb *standby) refresh(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	l, err := sb.watcher.Leader(rctx)
	var u *url.URL
	if err == nil && l.Alive && l.Advertise != "" && l.Advertise != sb.self {
		u, _ = url.Parse(l.Advertise)
	}
	if old := sb.leader.Swap(u); urlString(old) != urlString(u) {
		sb.log.Info("leadership: the leader is now", "leader", urlString(u), "epoch", l.Epoch, "holder", l.Holder)
	}
}

// urlString is u.String(), or "" for nil.
func urlString(u *url.URL) string {
	if u == nil {
		return ""
	}
	return u.String()
}

// leaderAddr returns the leader's address, or "" when none is known.
func (sb *standby) leaderAddr() string { return urlString(sb.leader.Load()) }

func (sb *standby) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(sb.leader.Load())
			// The Host the client signed (AWS Signature Version 4 signs
			// it) goes on unchanged: the leader must answer to it
			// (--allow-host).
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
			pr.Out.Header.Set(forwardedHeader, sb.self)
		},
		FlushInterval: -1, // log streams go on as they come
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			sb.log.Warn("leadership: forwarding to the leader failed", "leader", sb.leaderAddr(), "err", err)
			unavailable(w, "this server is a standby and could not reach the leader; retry shortly")
		},
		ErrorLog: slog.NewLogLogger(sb.log.Handler(), slog.LevelWarn),
	}
}

// ServeHTTP forwards r to the leader.
func (sb *standby) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(forwardedHeader) != "" {
		unavailable(w, "this server is a standby too; retry shortly")
		return
	}
	if r.URL.Path == metrics.Path {
		// A standby's metrics are not the leader's: scrape each server.
		unavailable(w, "this server is a standby: it has no metrics of its own; scrape the leader")
		return
	}
	if sb.leader.Load() == nil {
		unavailable(w, "this server is a standby and no leader is serving yet (a failover is under way); retry shortly")
		return
	}
	sb.proxy.ServeHTTP(w, r)
}

// unavailable answers 503 with a ServerException, which the AWS SDKs
// retry, after Retry-After.
func unavailable(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(map[string]string{"__type": "ServerException", "message": msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", "ServerException")
	w.Header().Set("Retry-After", "1")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(b) //nolint:errcheck // the client may be gone
}
