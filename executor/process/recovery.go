package process

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
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
// disk, written at the launch, in one file per attempt (creating a file or a
// directory is what costs most per attempt; appending a line to an open file
// costs little):
//
//   - launched, created atomically and exclusively by the supervisor before
//     it forks the job: its first line is the launchRecord (the supervisor's
//     pid, start time and boot ID, the attempt directory, the GPUs the
//     attempt holds and its own grace period). A recovery that finds an
//     attempt directory without it creates it too, as a tombstone, so that
//     no supervisor launches the attempt afterwards;
//   - then, in the same file, {"started":…} right after the fork (the job's
//     pid, start time and boot ID) and {"exit":…} when the job's processes
//     are all gone. A line counts once it ends with a newline: a reader
//     that catches one half-written sees the attempt as it was before it;
//   - live/<attemptID>, a hard link to launched, made by the supervisor
//     right after launched and before the fork, removed by Forget: it
//     finds the directory from the attempt ID alone, and lists the attempts
//     that may be running when a new executor starts.
//
// Data directories of earlier versions hold supervisor.json, started.json and
// exit.json beside a one-line launched, and live/ symbolic links to attempt
// directories: they are read too.

// launchRecord is the first line of the launched file.
type launchRecord struct {
	Supervisor identity  `json:"supervisor"`
	At         time.Time `json:"at"`
	// Lost marks a tombstone: a recovery found the attempt prepared but
	// never launched, and fenced it off so that it never runs.
	Lost bool `json:"lost,omitempty"`
	// Dir is the attempt directory (live/<attemptID> is a link to this
	// file); GPUs and JobGrace are the supervisorConfig's. Empty in the
	// records of earlier versions, which kept them in supervisor.json.
	Dir      string        `json:"dir,omitempty"`
	GPUs     []string      `json:"gpus,omitempty"`
	JobGrace time.Duration `json:"jobGrace,omitempty"`
}

// recordLine is a line of the launched file after the first.
type recordLine struct {
	Started *started    `json:"started,omitempty"`
	Exit    *exitRecord `json:"exit,omitempty"`
}

// records is what an attempt directory says about the attempt.
type records struct {
	launch  *launchRecord // nil: no launched file
	started *started
	exit    *exitRecord
	// cfg: the GPUs and grace period are known (from the launch record, or
	// an earlier version's supervisor.json).
	cfg      bool
	gpus     []string
	jobGrace time.Duration
}

// parseRecord reads the content of a launched file: the launch record
// (zero if unreadable, as a launched file written before the record existed
// is), then the complete lines that follow it.
func parseRecord(b []byte) records {
	var r records
	lr := &launchRecord{}
	r.launch = lr
	first, rest, ok := bytes.Cut(b, []byte{'\n'})
	if json.Unmarshal(first, lr) != nil {
		*lr = launchRecord{}
	}
	if !ok {
		return r
	}
	for {
		line, more, ok := bytes.Cut(rest, []byte{'\n'})
		if !ok {
			break // not complete yet
		}
		var l recordLine
		if json.Unmarshal(line, &l) == nil {
			if l.Started != nil {
				r.started = l.Started
			}
			if l.Exit != nil {
				r.exit = l.Exit
			}
		}
		rest = more
	}
	return r
}

// readRecords reads the records of the attempt directory dir.
func readRecords(fs dataFS, dir string) records {
	var r records
	if b, err := fs.ReadFile(filepath.Join(dir, fileLaunched)); err == nil {
		r = parseRecord(b)
	}
	if r.launch != nil && r.launch.Dir != "" {
		r.cfg, r.gpus, r.jobGrace = true, r.launch.GPUs, r.launch.JobGrace
	} else {
		// An earlier version's records, or a tombstone.
		var cfg supervisorConfig
		if readJSON(fs, filepath.Join(dir, fileConfig), &cfg) == nil {
			r.cfg, r.gpus, r.jobGrace = true, cfg.GPUs, cfg.JobGrace
		}
		if r.started == nil {
			var sr started
			if readJSON(fs, filepath.Join(dir, fileStarted), &sr) == nil {
				r.started = &sr
			}
		}
		if r.exit == nil {
			var x exitRecord
			if readJSON(fs, filepath.Join(dir, fileExit), &x) == nil {
				r.exit = &x
			}
		}
	}
	return r
}

// createRecord creates the launched file of dir exclusively, with lr as its
// first line, links it as live (unless live is ""), and returns it open for
// appendRecord. It fails with an error wrapping os.ErrExist when launched
// exists. A reader sees no file or the whole first line, and the file costs
// one inode: the line is written to an unnamed file (O_TMPFILE) that is then
// hard-linked to launched (link(2) does not replace an existing file) and to
// live; where unnamed files cannot be made, to a temporary file that is
// hard-linked to launched and renamed to live.
func createRecord(fs dataFS, dir string, lr launchRecord, live string) (*os.File, error) {
	b, _ := json.Marshal(lr)
	b = append(b, '\n')
	path := filepath.Join(dir, fileLaunched)
	if f, ok, err := createRecordUnnamed(fs, dir, b, path, live); ok {
		return f, err
	}
	f, err := fs.CreateTemp(dir, "."+fileLaunched+".tmp")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	if _, err := f.Write(b); err != nil {
		f.Close()
		fs.Remove(tmp)
		return nil, err
	}
	if err := fs.Link(tmp, path); err != nil {
		f.Close()
		fs.Remove(tmp)
		if errors.Is(err, os.ErrExist) {
			return nil, err
		}
		// A file system without hard links: O_EXCL, and a reader may see
		// the file before its content (readLaunch then knows no supervisor).
		f, err = fs.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return nil, err
		}
		if live != "" {
			linkLive(fs, live, dir)
		}
		return f, nil
	}
	if live == "" {
		fs.Remove(tmp)
		return f, nil
	}
	err = fs.Rename(tmp, live)
	if errors.Is(err, os.ErrNotExist) { // live/ was removed under us
		if err = fs.MkdirAll(filepath.Dir(live), 0o700, nil); err == nil {
			err = fs.Rename(tmp, live)
		}
	}
	if err != nil {
		// The attempt is still found from its ID, by looking under every job.
		fs.Remove(tmp)
	}
	return f, nil
}

// createRecordUnnamed is createRecord with an unnamed file (O_TMPFILE): its
// content is written before it has a name, then it is linked as launched
// (exclusively: link(2) does not replace) and as live. No temporary name is
// made, renamed or removed, which spares two changes of directories per
// attempt. ok is false, with nothing created, where unnamed files cannot be
// made or named here: the caller makes a named temporary file instead.
func createRecordUnnamed(fs dataFS, dir string, b []byte, path, live string) (*os.File, bool, error) {
	f, ok, err := fs.CreateUnnamed(dir, 0o600)
	if !ok || err != nil {
		return nil, ok, err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, true, err
	}
	if err := fs.LinkAs(f, path); err != nil {
		f.Close()
		if errors.Is(err, os.ErrExist) {
			return nil, true, err
		}
		if errors.Is(err, os.ErrNotExist) && fs.IsDir(dir) {
			// No /proc to name the file through: nothing was created.
			noTmpfile.Store(true)
			return nil, false, nil
		}
		return nil, true, err
	}
	if live != "" {
		err := fs.LinkAs(f, live)
		if errors.Is(err, os.ErrNotExist) { // live/ was removed under us
			if err = fs.MkdirAll(filepath.Dir(live), 0o700, nil); err == nil {
				err = fs.LinkAs(f, live)
			}
		}
		// On failure the attempt is still found from its ID, by looking
		// under every job.
	}
	return f, true, nil
}

// appendRecord appends a line to an attempt's record.
func appendRecord(f *os.File, l recordLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	return err
}

const dirLive = "live" // in the data directory: one link per attempt not yet forgotten

// createExclusive creates path with content b, failing with an error that
// wraps os.ErrExist when path exists. A reader sees no file or the whole
// content: the content is written to a temporary file that is then
// hard-linked to path (link(2) does not replace an existing file).
func createExclusive(fs dataFS, path string, b []byte) error {
	f, err := fs.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer fs.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	err = fs.Link(tmp, path)
	if err == nil || errors.Is(err, os.ErrExist) {
		return err
	}
	// A file system without hard links: O_EXCL, and a reader may see the
	// file before its content (readLaunch then knows no supervisor).
	return fs.CreateFile(path, b, 0o600)
}

// readLaunch reads the first line of the launched file of dir. It returns
// the os error for a missing file, and a zero record (no supervisor known)
// for an empty or unreadable one, as a launched file written before the
// record existed is.
func readLaunch(fs dataFS, dir string) (launchRecord, error) {
	b, err := fs.ReadFile(filepath.Join(dir, fileLaunched))
	if err != nil {
		return launchRecord{}, err
	}
	return *parseRecord(b).launch, nil
}

// linkLive records the attempt directory dir as live (live/<attemptID>) with
// a symbolic link, as earlier versions did, where hard links fail.
func linkLive(fs dataFS, path, dir string) error {
	rel, err := filepath.Rel(filepath.Dir(path), dir)
	if err != nil {
		rel = dir
	}
	err = fs.Symlink(rel, path)
	if errors.Is(err, os.ErrNotExist) { // live/ was removed under us
		if err = fs.MkdirAll(filepath.Dir(path), 0o700, nil); err == nil {
			err = fs.Symlink(rel, path)
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
	live := filepath.Join(e.o.DataDir, dirLive, attemptID)
	// The link and the record are read, never followed: the directory
	// they name is then opened beneath the data directory like any other.
	if t, err := e.fs.Readlink(live); err == nil { // an earlier version's link
		if !filepath.IsAbs(t) {
			t = filepath.Join(e.o.DataDir, dirLive, t)
		}
		if t = filepath.Clean(t); e.fs.IsDir(t) {
			return t
		}
	} else if b, err := e.fs.ReadFile(live); err == nil { // a link to the record
		if t := parseRecord(b).launch.Dir; t != "" {
			if t = filepath.Clean(t); e.fs.IsDir(t) {
				return t
			}
		}
	}
	root := filepath.Join(e.o.DataDir, "attempts")
	if d := filepath.Join(root, attemptID); e.fs.IsDir(d) {
		return d
	}
	// Earlier versions put attempts under their job.
	jobs, _ := e.fs.ReadDir(root)
	for _, j := range jobs {
		if !j.IsDir() {
			continue
		}
		if d := filepath.Join(root, j.Name(), attemptID); e.fs.IsDir(d) {
			return d
		}
	}
	return ""
}

// oldAttemptDir is where earlier versions put an attempt's directory.
func oldAttemptDir(dataDir, jobID, attemptID string) string {
	return filepath.Join(dataDir, "attempts", jobID, attemptID)
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
	for pass := 0; pass < 3; pass++ {
		r := readRecords(e.fs, dir)
		if r.cfg {
			st.GPUs, st.Grace = r.gpus, r.jobGrace
		}
		if r.started != nil {
			st.Supervisor, st.Job = r.started.Supervisor, r.started.Job
		}
		if r.exit != nil {
			at := r.exit.At
			if r.started != nil && !r.started.At.IsZero() {
				at = r.started.At
			}
			return st, exited, at
		}
		if r.started != nil {
			if st.Supervisor.alive() || st.Job.alive() {
				return st, running, r.started.At
			}
			continue // look for the exit once more: it may have been written meanwhile
		}
		if r.launch == nil {
			if !fence {
				return st, lost, time.Time{}
			}
			// The attempt directory exists: a supervisor may hold its start
			// request (the configuration travels with it).
			tomb, _ := json.Marshal(launchRecord{At: time.Now().UTC(), Lost: true})
			err := createExclusive(e.fs, filepath.Join(dir, fileLaunched), tomb)
			if err == nil || !errors.Is(err, os.ErrExist) {
				return st, lost, time.Time{}
			}
			continue // a supervisor launched it just now: judge again
		}
		lr := *r.launch
		if lr.Lost {
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
	if !e.fs.Exists(live) {
		if err := e.indexOld(live); err != nil {
			return err
		}
	}
	ents, err := e.fs.ReadDir(live)
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
		// Ended ones are judged when asked (Recover or Start reads them).
		st, v, at := e.inspect(id, dir, state{}, false)
		if v != running {
			continue
		}
		a := &attempt{id: id, Slot: executor.NewSlot(), st: st}
		a.handle = e.handleOf(a, at)
		e.mu.Lock()
		e.attempts[id] = a
		e.mu.Unlock()
		close(a.Ready)
		e.follow(a)
	}
	return nil
}

// indexOld creates live/ with a link for every attempt directory that has
// no exit.json yet.
func (e *Executor) indexOld(live string) error {
	var r [6]byte
	rand.Read(r[:])
	tmp := filepath.Join(e.o.DataDir, ".live.tmp"+hex.EncodeToString(r[:]))
	if err := e.fs.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	root := filepath.Join(e.o.DataDir, "attempts")
	index := func(id, d string) {
		if readRecords(e.fs, d).exit != nil {
			return
		}
		if rel, err := filepath.Rel(live, d); err == nil {
			e.fs.Symlink(rel, filepath.Join(tmp, id))
		}
	}
	entries, _ := e.fs.ReadDir(root)
	for _, en := range entries {
		d := filepath.Join(root, en.Name())
		if !en.IsDir() {
			continue
		}
		if e.fs.Exists(filepath.Join(d, fileLaunched)) {
			index(en.Name(), d) // attempts/<attemptID>
			continue
		}
		as, _ := e.fs.ReadDir(d) // attempts/<jobID>/<attemptID>, from earlier versions
		for _, a := range as {
			if a.IsDir() {
				index(a.Name(), filepath.Join(d, a.Name()))
			}
		}
	}
	if err := e.fs.Rename(tmp, live); err != nil {
		ents, _ := e.fs.ReadDir(tmp)
		for _, en := range ents {
			e.fs.Remove(filepath.Join(tmp, en.Name()))
		}
		e.fs.Remove(tmp)
		if e.fs.Exists(live) {
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
	a := &attempt{id: h.AttemptID, Slot: executor.NewSlot()}
	e.attempts[h.AttemptID] = a
	e.mu.Unlock()
	defer close(a.Ready)

	st, v, at := e.inspect(h.AttemptID, dir, hint, true)
	a.st = st
	if at.IsZero() {
		at = h.StartedAt
	}
	a.handle = e.handleOf(a, at)
	switch v {
	case exited:
		e.finish(a, nil)
		return executor.Exited
	case running:
		e.follow(a)
		return executor.Running
	}
	e.mu.Lock()
	delete(e.attempts, h.AttemptID)
	e.mu.Unlock()
	a.StartErr = executor.ErrUnknownAttempt
	return executor.Lost
}
