package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"qshare/executor"
)

// How an attempt is recovered from its directory alone.
//
// The daemon persists an attempt's Handle only after Start returns, so a
// server killed during Start leaves a launched attempt whose Handle.State was
// never saved. Everything Recover and a repeated Start need is therefore on
// disk, written before or right after the launch:
//
//   - live/<attemptID>, a symbolic link to the attempt directory, made by
//     Start before the launch and removed by Forget: it finds the directory
//     from the attempt ID alone, and lists the attempts that may be running
//     when a new executor starts;
//   - supervisor.json, written by Start before the launch: what runs, and the
//     GPUs it was given;
//   - launched, created atomically and exclusively by the supervisor before
//     it forks the job, holding the supervisor's pid, start time and boot ID
//     (a recovery that finds an attempt never launched creates it too, as a
//     tombstone, so that no supervisor launches the attempt afterwards);
//   - started.json, written right after the fork: the job's pid, start time
//     and boot ID;
//   - exit.json, written last: how the job ended.

// launchRecord is the content of the launched file.
type launchRecord struct {
	Supervisor identity  `json:"supervisor"`
	At         time.Time `json:"at"`
	// Lost marks a tombstone: a recovery found the attempt prepared but
	// never launched, and fenced it off so that it never runs.
	Lost bool `json:"lost,omitempty"`
}

const dirLive = "live" // in the data directory: one link per attempt not yet forgotten

// createExclusive creates path with content b, failing with an error that
// wraps os.ErrExist when path exists. A reader sees no file or the whole
// content: the content is written to a temporary file that is then
// hard-linked to path (link(2) does not replace an existing file).
func createExclusive(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	err = os.Link(tmp, path)
	if err == nil || errors.Is(err, os.ErrExist) {
		return err
	}
	// A file system without hard links: O_EXCL, and a reader may see the
	// file before its content (readLaunch then knows no supervisor).
	lf, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = lf.Write(b)
	if cerr := lf.Close(); err == nil {
		err = cerr
	}
	return err
}

// readLaunch reads the launched file of dir. It returns the os error for a
// missing file, and a zero record (no supervisor known) for an empty or
// unreadable one, as a launched file written before the record existed is.
func readLaunch(dir string) (launchRecord, error) {
	b, err := os.ReadFile(filepath.Join(dir, fileLaunched))
	if err != nil {
		return launchRecord{}, err
	}
	var r launchRecord
	if json.Unmarshal(b, &r) != nil {
		return launchRecord{}, nil
	}
	return r, nil
}

// link records the attempt directory under live/, before the launch.
func (e *Executor) link(attemptID, dir string) error {
	rel, err := filepath.Rel(filepath.Join(e.o.DataDir, dirLive), dir)
	if err != nil {
		rel = dir
	}
	path := filepath.Join(e.o.DataDir, dirLive, attemptID)
	err = os.Symlink(rel, path)
	if errors.Is(err, os.ErrNotExist) { // live/ was removed under us
		if err = os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
			err = os.Symlink(rel, path)
		}
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// findDir returns the directory of an attempt from its ID alone: through
// its live/ link, or else by looking under every job (an attempt forgotten,
// or started by a version without links). It returns "" if there is none.
func (e *Executor) findDir(attemptID string) string {
	if pathComponent("attempt ID", attemptID) != nil {
		return ""
	}
	if t, err := os.Readlink(filepath.Join(e.o.DataDir, dirLive, attemptID)); err == nil {
		if !filepath.IsAbs(t) {
			t = filepath.Join(e.o.DataDir, dirLive, t)
		}
		if st, err := os.Stat(t); err == nil && st.IsDir() {
			return filepath.Clean(t)
		}
	}
	root := filepath.Join(e.o.DataDir, "attempts")
	jobs, _ := os.ReadDir(root)
	for _, j := range jobs {
		if !j.IsDir() {
			continue
		}
		d := filepath.Join(root, j.Name(), attemptID)
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
	}
	return ""
}

// verdict is what the records of an attempt say about it.
type verdict int

const (
	// lost: never launched (and fenced off), or launched but its fate is
	// unknowable (nothing of it alive, no exit recorded).
	lost verdict = iota
	running
	exited
)

// inspect judges an attempt from its directory: exit.json → exited; the
// supervisor that launched it, or its job, alive (same pid, start time and
// boot) → running; launched, the launching supervisor gone before it recorded
// the job, but a process carrying the attempt's QSHARE_ATTEMPT_ID alive →
// running (the supervisor died between the fork and started.json); else
// lost. hint is what a Handle.State said, for records older than the launch
// record. With fence, an attempt prepared but never launched gets a
// tombstone launched file, so that no supervisor still holding its start
// request can launch it after it was declared lost. It returns the state to
// follow the attempt with and its start time.
func (e *Executor) inspect(attemptID, dir string, hint state, fence bool) (state, verdict, time.Time) {
	st := hint
	st.Dir = dir
	var cfg supervisorConfig
	haveCfg := readJSON(filepath.Join(dir, fileConfig), &cfg) == nil
	if haveCfg {
		st.GPUs, st.Grace = cfg.GPUs, cfg.JobGrace
	}
	for pass := 0; pass < 3; pass++ {
		var sr started
		haveStarted := readJSON(filepath.Join(dir, fileStarted), &sr) == nil
		if haveStarted {
			st.Supervisor, st.Job = sr.Supervisor, sr.Job
		}
		var x exitRecord
		if readJSON(filepath.Join(dir, fileExit), &x) == nil {
			at := sr.At
			if at.IsZero() {
				at = x.At
			}
			return st, exited, at
		}
		if haveStarted {
			if st.Supervisor.alive() || st.Job.alive() {
				return st, running, sr.At
			}
			continue // look for exit.json once more: it may have been written meanwhile
		}
		lr, err := readLaunch(dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if !fence || !haveCfg {
				// No supervisor was ever asked to launch an attempt without
				// its supervisor.json: it cannot start later either.
				return st, lost, time.Time{}
			}
			tomb, _ := json.Marshal(launchRecord{At: time.Now().UTC(), Lost: true})
			err := createExclusive(filepath.Join(dir, fileLaunched), tomb)
			if err == nil || !errors.Is(err, os.ErrExist) {
				return st, lost, time.Time{}
			}
			continue // a supervisor launched it just now: judge again
		case err != nil:
			return st, lost, time.Time{}
		case lr.Lost:
			return st, lost, time.Time{}
		}
		if lr.Supervisor.alive() {
			// It is launching the job, or has just launched it: started.json
			// follows, and follow picks it up.
			st.Supervisor = lr.Supervisor
			return st, running, lr.At
		}
		if st.Supervisor.alive() || st.Job.alive() { // identities from the handle
			return st, running, lr.At
		}
		if job, ok := findAttemptProcess(attemptID); ok {
			st.Supervisor, st.Job = lr.Supervisor, job
			return st, running, lr.At
		}
	}
	return st, lost, time.Time{}
}

// findAttemptProcess looks for a live process that carries the attempt's
// QSHARE_ATTEMPT_ID in its environment, preferring the leader of its process
// group (the job itself). It is the last resort of inspect, for a job whose
// supervisor died before it wrote started.json.
func findAttemptProcess(attemptID string) (identity, bool) {
	mark := []byte("\x00QSHARE_ATTEMPT_ID=" + attemptID + "\x00")
	ents, _ := os.ReadDir("/proc")
	var other identity
	found := false
	for _, en := range ents {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + en.Name() + "/environ")
		if err != nil || !bytes.Contains(append([]byte{0}, env...), mark) {
			continue
		}
		id, err := identify(pid)
		if err != nil || !id.alive() {
			continue
		}
		if pgrp, err := procPgrp(pid); err == nil && pgrp == pid {
			return id, true
		}
		if !found {
			other, found = id, true
		}
	}
	return other, found
}

// recoverLive re-attaches, when the executor starts, to every attempt under
// live/ that still runs, before anything else can claim GPUs: a running
// attempt whose server died during Start has no Handle.State for the daemon
// to recover it with, and its GPUs must not be given to a new attempt before
// the daemon gets to it. Recover and Start of such an attempt then find it
// in memory. A data directory from before live/ existed is indexed first.
func (e *Executor) recoverLive() error {
	live := filepath.Join(e.o.DataDir, dirLive)
	if _, err := os.Stat(live); errors.Is(err, os.ErrNotExist) {
		if err := e.indexOld(live); err != nil {
			return err
		}
	}
	ents, err := os.ReadDir(live)
	if err != nil {
		return err
	}
	for _, en := range ents {
		id := en.Name()
		if pathComponent("attempt ID", id) != nil || id[0] == '.' {
			continue
		}
		dir := e.findDir(id)
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, fileExit)); err == nil {
			continue // ended: Recover or Start reads it when asked
		}
		st, v, at := e.inspect(id, dir, state{}, false)
		if v != running {
			continue
		}
		a := &attempt{id: id, ready: make(chan struct{}), done: make(chan struct{}), st: st}
		a.handle = e.handleOf(a, at)
		e.mu.Lock()
		e.attempts[id] = a
		e.mu.Unlock()
		close(a.ready)
		e.follow(a)
	}
	return nil
}

// indexOld creates live/ with a link for every attempt directory that has
// no exit.json yet.
func (e *Executor) indexOld(live string) error {
	tmp, err := os.MkdirTemp(e.o.DataDir, ".live.tmp*")
	if err != nil {
		return err
	}
	root := filepath.Join(e.o.DataDir, "attempts")
	jobs, _ := os.ReadDir(root)
	for _, j := range jobs {
		as, _ := os.ReadDir(filepath.Join(root, j.Name()))
		for _, a := range as {
			d := filepath.Join(root, j.Name(), a.Name())
			if _, err := os.Stat(filepath.Join(d, fileExit)); err == nil || !a.IsDir() {
				continue
			}
			if rel, err := filepath.Rel(live, d); err == nil {
				os.Symlink(rel, filepath.Join(tmp, a.Name()))
			}
		}
	}
	if err := os.Rename(tmp, live); err != nil {
		os.RemoveAll(tmp)
		if _, serr := os.Stat(live); serr == nil {
			return nil // another executor made it
		}
		return err
	}
	return nil
}

// recoverFromDisk judges an attempt that is not in memory from its
// directory, for Recover. It registers the attempt while it looks, so that
// a racing Start or Recover of the same ID waits for it.
func (e *Executor) recoverFromDisk(h executor.Handle, hint state, dir string) executor.Recovery {
	e.mu.Lock()
	if _, ok := e.attempts[h.AttemptID]; ok {
		e.mu.Unlock()
		return 0 // a racing Start or Recover won: ask again
	}
	a := &attempt{id: h.AttemptID, ready: make(chan struct{}), done: make(chan struct{})}
	e.attempts[h.AttemptID] = a
	e.mu.Unlock()
	defer close(a.ready)

	st, v, at := e.inspect(h.AttemptID, dir, hint, true)
	a.st = st
	if at.IsZero() {
		at = h.StartedAt
	}
	a.handle = e.handleOf(a, at)
	switch v {
	case exited:
		e.finish(a)
		return executor.Exited
	case running:
		e.follow(a)
		return executor.Running
	}
	e.mu.Lock()
	delete(e.attempts, h.AttemptID)
	e.mu.Unlock()
	a.startErr = executor.ErrUnknownAttempt
	return executor.Lost
}
