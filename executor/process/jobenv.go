package process

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"qshare"
)

// jobUser is the Unix user every job runs as (Options.RunAs, --run-as):
// the supervisor forks each job with this user's uid, gid and
// supplementary groups.
type jobUser struct {
	Name   string   `json:"name"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	Home   string   `json:"home,omitempty"`
}

// lookupJobUser finds the user that jobs run as, by name or numeric uid.
// It refuses root: a job that runs as root can do anything on the host,
// which is what --run-as is there to prevent.
func lookupJobUser(name string) (*jobUser, error) { return lookupUser("--run-as", name) }

// lookupUser is lookupJobUser, its messages naming the setting field
// (--run-as, or a principal's unixUser).
func lookupUser(field, name string) (*jobUser, error) {
	u, err := user.Lookup(name)
	if err != nil {
		if _, nerr := strconv.Atoi(name); nerr == nil {
			u, err = user.LookupId(name)
		}
	}
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "%s %q: no such user on this host (%v): create it, for example with useradd --system %s", field, name, err, name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "%s %q: the user's uid %q or gid %q is not a number", field, name, u.Uid, u.Gid)
	}
	if uid == 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "%s %q is root: give an unprivileged user, so that jobs cannot act as root", field, name)
	}
	ju := &jobUser{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "%s %q: cannot list the user's groups: %v", field, name, err)
	}
	for i, g := range append([]string{u.Gid}, ids...) {
		n, err := strconv.ParseUint(g, 10, 32)
		if err != nil {
			continue
		}
		if grp := privilegedGroup(uint32(n)); grp != "" {
			return nil, qshare.Errorf(qshare.EINVALID, "%s %q is in the group %s (gid %d), which gives root's powers or root's files: give an unprivileged user, without that group, so that jobs cannot act as root", field, name, grp, n)
		}
		if i > 0 { // the first is the primary group, checked only
			ju.Groups = append(ju.Groups, uint32(n))
		}
	}
	return ju, nil
}

// privilegedGroups are the groups whose members can become root, or read
// or write what only root may (the disks, the shadow file, the Docker or
// LXD socket, sudo's rights): a job's user in one of them is as good as
// root, and is refused as root is.
var privilegedGroups = map[string]bool{"root": true, "wheel": true, "sudo": true, "admin": true, "adm": true, "docker": true,
	"lxd": true, "disk": true, "shadow": true, "kmem": true}

// privilegedGroup returns the name of gid when it is gid 0 or one of
// privilegedGroups, else "".
func privilegedGroup(gid uint32) string {
	name := strconv.FormatUint(uint64(gid), 10)
	if g, err := user.LookupGroupId(name); err == nil {
		name = g.Name
	}
	if gid == 0 || privilegedGroups[name] {
		return name
	}
	return ""
}

// defaultJobEnv names the server's environment variables that every job
// gets; Options.PassEnv adds more.
var defaultJobEnv = []string{"PATH", "HOME", "LANG", "TZ"}

// jobBaseEnv picks from the server's environment what a job inherits: the
// variables of defaultJobEnv and pass, in that order, those the server has.
// Anything else the server holds (credentials, tokens, proxies) stays with
// the server. qshare's own variables (QSHARE_*) are never passed: the
// executor sets those a job needs. With u set, HOME is u's home.
func jobBaseEnv(server, pass []string, u *jobUser) []string {
	have := map[string]string{}
	for _, kv := range server {
		if k, v, ok := strings.Cut(kv, "="); ok {
			have[k] = v
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, k := range append(append([]string(nil), defaultJobEnv...), pass...) {
		if seen[k] || strings.HasPrefix(k, "QSHARE_") {
			continue
		}
		seen[k] = true
		v, ok := have[k]
		if k == "HOME" && u != nil && u.Home != "" {
			v, ok = u.Home, true
		}
		if ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// checkPassEnv checks the names given to Options.PassEnv.
func checkPassEnv(names []string) error {
	for _, k := range names {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return qshare.Errorf(qshare.EINVALID, "--pass-env %q is not a variable name", k)
		}
		if strings.HasPrefix(k, "QSHARE_") {
			return qshare.Errorf(qshare.EINVALID, "--pass-env %s: qshare's own variables (QSHARE_*) are never passed to jobs; the executor sets those a job needs", k)
		}
	}
	return nil
}

// checkReachable checks that u can enter dir: every directory on the way
// lets u search it (by owner, group or other bits), as the job's working
// directory lies beneath it.
func checkReachable(dir string, u *jobUser) error {
	groups := map[uint32]bool{u.GID: true}
	for _, g := range u.Groups {
		groups[g] = true
	}
	for p := dir; ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return qshare.Errorf(qshare.EINVALID, "--run-as %s: %v", u.Name, err)
		}
		m := st.Mode().Perm()
		ok := m&0o001 != 0
		if s, isSys := st.Sys().(*syscall.Stat_t); isSys {
			ok = ok || (s.Uid == u.UID && m&0o100 != 0) || (groups[s.Gid] && m&0o010 != 0)
		}
		if !ok {
			return qshare.Errorf(qshare.EINVALID, "--run-as %s: the user cannot enter %s (mode %#o), which holds the jobs' directories: give it o+x (chmod o+x %s) or choose another --data-dir", u.Name, p, m, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}
