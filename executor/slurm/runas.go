package slurm

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"qshare"
	"qshare/executor"
)

// Jobs of their own users: an attempt whose Spec names a RunAs user (its
// principal's unixUser) is submitted as that user (sbatch --uid and --gid,
// which Slurm allows root), and the job's directory and the attempt's
// directory are given to the user, so that its command, the step runner
// and slurmstepd (which writes output.log) can write there.
//
// The attempt's directory then belongs to the job's user, who could
// replace the files the server acts on as root: so the server trusts
// job.json and step.json only when it owns them (a user cannot make a
// file of root's), and a job's failure file is found from job.json.

// runUser is a user that jobs run as.
type runUser struct {
	uid, gid int
}

// users caches the RunAs users, looked up and checked once each.
type users struct {
	mu   sync.Mutex
	m    map[string]*runUser
	open sync.Once // jobs/ and attempts/ made traversable (0711) for them
}

// userFor returns the user an attempt of s runs as, or nil for the
// server's own. It refuses, with an EINVALID *qshare.Error that says what
// to do, a user that does not exist, root, any other user when the server
// is not root, and a setup that the user could not run in (a sharedDir it
// cannot reach, a step runner it cannot run).
func (e *Executor) userFor(s executor.Spec) (*runUser, error) {
	if s.RunAs == "" {
		return nil, nil
	}
	e.users.mu.Lock()
	defer e.users.mu.Unlock()
	if u, ok := e.users.m[s.RunAs]; ok {
		return u, nil
	}
	const field = "the job's Unix user (its submitter's unixUser)"
	lu, err := user.Lookup(s.RunAs)
	if err != nil {
		if _, nerr := strconv.Atoi(s.RunAs); nerr == nil {
			lu, err = user.LookupId(s.RunAs)
		}
	}
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "%s %q: no such user on this host (%v): create it on the server and on every node", field, s.RunAs, err)
	}
	uid, err1 := strconv.Atoi(lu.Uid)
	gid, err2 := strconv.Atoi(lu.Gid)
	if err1 != nil || err2 != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "%s %q: its uid %q or gid %q is not a number", field, s.RunAs, lu.Uid, lu.Gid)
	}
	if uid == 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "%s %q is root: give an unprivileged user, so that jobs cannot act as root", field, s.RunAs)
	}
	var u *runUser
	switch euid := os.Geteuid(); {
	case uid == euid:
		// The server's own user: what the jobs run as anyway.
	case euid != 0:
		return nil, qshare.Errorf(qshare.EINVALID, "%s %s: this server runs as uid %d, not as root, so Slurm takes its jobs only as its own user: run it as root, or give the principal this server's user", field, s.RunAs, euid)
	default:
		if err := e.reachable(); err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "%s %s: %v", field, s.RunAs, err)
		}
		var perr error
		e.users.open.Do(func() {
			for _, d := range []string{"jobs", "attempts"} {
				if err := os.Chmod(filepath.Join(e.root, d), 0o711); err != nil {
					perr = qshare.Errorf(qshare.EINTERNAL, "slurm executor: cannot let jobs of their own users reach %s in sharedDir: %v", d, err)
				}
			}
		})
		if perr != nil {
			return nil, perr
		}
		u = &runUser{uid: uid, gid: gid}
	}
	if e.users.m == nil {
		e.users.m = map[string]*runUser{}
	}
	e.users.m[s.RunAs] = u
	return u, nil
}

// reachable checks that other users can reach sharedDir and run the step
// runner: every directory above them searchable by others, the step
// runner executable by others.
func (e *Executor) reachable() error {
	step := e.o.Step[0]
	if st, err := os.Stat(step); err != nil || st.Mode()&0o001 == 0 {
		return fmt.Errorf("the step runner (%s) is not executable by other users: install qshare where every user may run it (mode 0755)", filepath.Base(step))
	}
	for what, p := range map[string]string{"sharedDir": e.root, "the step runner's directory": filepath.Dir(step)} {
		for d := p; ; d = filepath.Dir(d) {
			if st, err := os.Stat(d); err != nil || st.Mode()&0o001 == 0 {
				return fmt.Errorf("a directory above %s is not searchable by other users (it needs o+x)", what)
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return nil
}

// give hands the paths (beneath sharedDir) to the job's user.
func (e *Executor) give(u *runUser, jobID string, paths ...string) error {
	if u == nil {
		return nil
	}
	for _, p := range paths {
		if err := e.fs.Chown(p, u.uid, u.gid); err != nil {
			return e.fileErr("giving the job's files to its user", err, jobID)
		}
	}
	return nil
}

// readOwn reads a file the server wrote (at most 1 MiB), refusing one that
// is not the server's own: in an attempt's directory that belongs to the
// job's user, the user could have replaced it.
func (e *Executor) readOwn(path string) ([]byte, error) {
	f, err := e.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("%s is not the server's own file", filepath.Base(path))
	}
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// readJSON is readOwn of a JSON file into v.
func (e *Executor) readJSON(path string, v any) error {
	b, err := e.readOwn(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
