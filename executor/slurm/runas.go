package slurm

import (
	"os"
	"os/user"
	"strconv"

	"qshare"
	"qshare/executor"
)

// checkRunAs refuses an attempt whose Spec names a RunAs user (its
// principal's unixUser) other than the server's own: the Slurm executor
// does not run jobs as their own users yet, and must not run them as the
// server's user instead. Its EINVALID *qshare.Error says so.
//
// Why not yet: sbatch --uid would run the job as the user, but the
// attempt's directory in sharedDir, where the step runner and slurmstepd
// write as the job's user, also holds the records that the server acts
// on (job.json names the batch job that Stop cancels, as root), so a job
// could point the server at someone else's batch job. Running as the
// principal needs those records moved where only the server writes.
func (e *Executor) checkRunAs(s executor.Spec) error {
	if s.RunAs == "" {
		return nil
	}
	u, err := user.Lookup(s.RunAs)
	if err != nil {
		if _, nerr := strconv.Atoi(s.RunAs); nerr == nil {
			u, err = user.LookupId(s.RunAs)
		}
	}
	if err == nil && u.Uid == strconv.Itoa(os.Geteuid()) {
		return nil // the server's own user: what the jobs run as anyway
	}
	return qshare.Errorf(qshare.EINVALID, "the job's Unix user (its submitter's unixUser) is %q, but the Slurm executor runs every job as the server's own user (uid %d) and does not run jobs as their principals' users yet: give the principal no unixUser, or the server's user", s.RunAs, os.Geteuid())
}
