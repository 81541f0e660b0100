package process

import (
	"errors"
	"os"
	"path/filepath"
	"sync"

	"qshare"
	"qshare/executor"
)

// CheckUser reports whether a process executor in this process could run
// jobs as the Unix user name (a name or a uid), as a job whose
// executor.Spec names it in RunAs: the user exists, is not root, and the
// server runs as root or as that very user. Its error is an EINVALID
// *qshare.Error that names field (such as "principal alice's unixUser")
// and says what to do. qshare serve --auth checks each principal's
// unixUser with it, at start and on every reload.
func CheckUser(field, name string) error {
	u, err := lookupUser(field, name)
	if err != nil {
		return err
	}
	if euid := os.Geteuid(); euid != 0 && uint32(euid) != u.UID {
		return qshare.Errorf(qshare.EINVALID, "%s %s: this server runs as uid %d, not as root, so it can run jobs only as its own user: run it as root, or give the principal this server's user", field, name, euid)
	}
	return nil
}

// userCache holds the users that executor.Spec.RunAs named, looked up and
// checked once each.
type userCache struct {
	mu      sync.Mutex
	users   map[string]*jobUser
	private sync.Once // attempts/ and live/ made private to the server
}

// userFor returns the user an attempt of s runs as: s.RunAs when it is set
// (checked as CheckUser does, and able to reach the jobs' directories),
// else the executor's own (Options.RunAs; nil: the server's user). The
// first time a job runs as a user of its own, the attempts' records and
// logs are made private to the server, as Options.RunAs makes them.
func (e *Executor) userFor(s executor.Spec) (*jobUser, error) {
	if s.RunAs == "" {
		return e.user, nil
	}
	e.runAs.mu.Lock()
	defer e.runAs.mu.Unlock()
	if u := e.runAs.users[s.RunAs]; u != nil {
		return u, nil
	}
	field := "the job's Unix user (its submitter's unixUser)"
	if err := CheckUser(field, s.RunAs); err != nil {
		return nil, err
	}
	u, err := lookupUser(field, s.RunAs)
	if err != nil {
		return nil, err
	}
	if u.UID != uint32(os.Geteuid()) {
		if err := checkReachable(filepath.Join(e.o.DataDir, "jobs"), u); err != nil {
			return nil, err
		}
		var perr error
		e.runAs.private.Do(func() {
			for _, d := range []string{"attempts", dirLive} {
				if err := os.Chmod(filepath.Join(e.o.DataDir, d), 0o700); err != nil && !errors.Is(err, os.ErrNotExist) {
					perr = qshare.Errorf(qshare.EINTERNAL, "process executor: cannot make the attempts' records private to the server: %v", err)
				}
			}
		})
		if perr != nil {
			return nil, perr
		}
	}
	if e.runAs.users == nil {
		e.runAs.users = map[string]*jobUser{}
	}
	e.runAs.users[s.RunAs] = u
	return u, nil
}
