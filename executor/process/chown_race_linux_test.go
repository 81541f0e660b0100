package process

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"qshare/internal/jobuser"
	"qshare/trainingjob"
)

// racerEnv makes the test binary the racer of TestPrepareOwnershipRace: a
// job's process, as the job's user, that swaps a name of its directory
// for a file of root's as fast as it can.
const racerEnv = "QSHARE_TEST_CHOWN_RACER"

// maybeRacer runs the racer and exits if racerEnv is set (TestMain).
func maybeRacer() {
	if spec := os.Getenv(racerEnv); spec != "" {
		os.Exit(racer(spec))
	}
}

// racer swaps dir/model and dir/bait (renameat2 RENAME_EXCHANGE) until it
// is killed; with link set it first makes dir/bait a hard link to link.
func racer(spec string) int {
	dir, link, _ := strings.Cut(spec, "|")
	if link != "" {
		if err := os.Link(link, filepath.Join(dir, "bait")); err != nil {
			os.Stderr.WriteString("racer: " + err.Error() + "\n")
			return 3
		}
	}
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 4
	}
	for {
		unix.Renameat2(d, "model", d, "bait", unix.RENAME_EXCHANGE) //nolint:errcheck // it races; a failure is one lost round
	}
}

// setProtectedHardlinks sets fs.protected_hardlinks to v for the test and
// restores it after; ok is false where the test cannot set it.
func setProtectedHardlinks(t *testing.T, v string) bool {
	const p = "/proc/sys/fs/protected_hardlinks"
	old, err := os.ReadFile(p)
	if err != nil {
		return false
	}
	if strings.TrimSpace(string(old)) == v {
		return true
	}
	if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
		return false
	}
	t.Cleanup(func() { os.WriteFile(p, old, 0o644) })
	return true
}

// TestPrepareOwnershipRace races a job's process, as the job's user,
// against the preparation of its next attempt, thousands of times: the
// process swaps its model/ directory for a file of root's (one that root
// put in the job's directory, or, with fs.protected_hardlinks=0, a hard
// link to a root-only file outside) while prepare gives the job's
// directories to the user. Root must never give the user that file
// (issue 30, point 2).
func TestPrepareOwnershipRace(t *testing.T) {
	alice := namedTestUser(t, "qshare-alice-test")
	rounds := 3000
	if testing.Short() {
		rounds = 300
	}
	for _, ph := range []string{"1", "0"} {
		t.Run("protected_hardlinks="+ph, func(t *testing.T) {
			if !setProtectedHardlinks(t, ph) {
				t.Skipf("cannot set /proc/sys/fs/protected_hardlinks to %s here: not run", ph)
			}
			data, err := os.MkdirTemp("", "qshare-chownrace")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(data)
			os.Chmod(data, 0o755)
			fs := newDataFS(data)
			defer fs.close()
			os.MkdirAll(filepath.Join(data, "jobs"), 0o755)
			req := &trainingjob.Request{}
			l, err := jobLayout(data, "race", "race-a1", req)
			if err != nil {
				t.Fatal(err)
			}
			s := spec("race", 1, payloadOf("true", nil))
			if _, err := prepare(fs, l, s, req, nil, nil, alice); err != nil {
				t.Fatal(err)
			}
			// The file the job wants: root's, 0600.
			victim := filepath.Join(l.Job, "bait")
			link := ""
			if ph == "0" {
				outside, err := os.MkdirTemp("", "qshare-chownrace-outside")
				if err != nil {
					t.Fatal(err)
				}
				defer os.RemoveAll(outside)
				os.Chmod(outside, 0o755)
				victim, link = filepath.Join(outside, "root-only"), filepath.Join(outside, "root-only")
			}
			if err := os.WriteFile(victim, []byte("root only\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			vf, err := os.Open(victim)
			if err != nil {
				t.Fatal(err)
			}
			defer vf.Close()

			// The racer is this test binary, copied where the user can run it.
			racerBin := filepath.Join(data, "racer")
			jobuser.CopySelf(t, racerBin)
			cmd := exec.Command(racerBin, "-test.run=^$")
			cmd.Env = append(os.Environ(), racerEnv+"="+l.Job+"|"+link)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: alice.UID, Gid: alice.GID}}
			out := &strings.Builder{}
			cmd.Stderr = out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { cmd.Process.Kill(); cmd.Wait() }()
			time.Sleep(50 * time.Millisecond)
			if cmd.ProcessState != nil || out.Len() > 0 {
				t.Fatalf("the racer ended: %s", out)
			}
			given, refused := 0, 0
			for i := 0; i < rounds; i++ {
				if _, err := prepare(fs, l, s, req, nil, nil, alice); err != nil {
					refused++
				}
				var st unix.Stat_t
				if unix.Fstat(int(vf.Fd()), &st) == nil && st.Uid != 0 {
					given++
					unix.Fchown(int(vf.Fd()), 0, 0)
				}
			}
			if given > 0 {
				t.Errorf("in %d preparations raced by the job, root gave the job's user a file of root's %d times", rounds, given)
			}
			t.Logf("%d preparations raced, %d refused (a link or a file where a directory was), the file given %d times", rounds, refused, given)
		})
	}
}
