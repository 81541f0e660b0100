package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Slurm's accounting (sacct), for the batch jobs that squeue no longer
// lists: slurmctld forgets a finished job after MinJobAge (300 s by
// default), and a job that ended while the server was away, or between
// two polls that failed, is then unknown to squeue. Where the cluster
// keeps accounting (slurmdbd), sacct still has the job's end (its state
// and exit code), so a job cancelled by hand, timed out or ended
// NODE_FAIL while qshare was down gets its real reason instead of "Lost".
// Without accounting, or when sacct fails, nothing changes: the step
// runners' records in the shared directory, else Lost.

// accounting remembers whether the cluster keeps accounting, which the
// executor asks slurmctld once (scontrol show config), at the first job
// squeue no longer lists.
type accounting struct {
	mu      sync.Mutex
	checked bool // the answer below is slurmctld's
	on      bool // AccountingStorageType is not accounting_storage/none, and sacct is on PATH
}

// sacctFormat asks for the fields qshare reads, the job name last so that
// nothing in it can shift the others (sacct -P with the unit separator as
// the delimiter).
const sacctFormat = "JobIDRaw,State,ExitCode,Reason,JobName"

// accountingOn reports whether the cluster keeps accounting. A failed
// scontrol is answered false and asked again next time.
func (e *Executor) accountingOn(ctx context.Context) bool {
	e.acct.mu.Lock()
	defer e.acct.mu.Unlock()
	if e.acct.checked {
		return e.acct.on
	}
	out, err := e.command(ctx, "scontrol", "show", "config")
	if err != nil {
		e.log.Warn("slurm executor: scontrol show config failed; whether the cluster keeps accounting is asked again later", "err", err)
		return false
	}
	typ := configValue(out, "AccountingStorageType")
	e.acct.checked = true
	e.acct.on = typ != "" && typ != "accounting_storage/none"
	if e.acct.on {
		if _, err := lookPath("sacct", e.o.Env); err != nil {
			e.log.Warn("slurm executor: the cluster keeps accounting but sacct is not on PATH; jobs squeue no longer lists are known only from the step runners' records", "AccountingStorageType", typ)
			e.acct.on = false
		}
	}
	e.log.Info("slurm executor: Slurm's accounting", "AccountingStorageType", typ, "sacct", e.acct.on)
	return e.acct.on
}

// configValue reads the value of key from `scontrol show config` (lines
// of "Key = value"); "" if it is absent.
func configValue(out, key string) string {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// accounted asks sacct about batch jobs that squeue no longer lists
// (names: job ID → the name the executor gave it) and returns those that
// sacct says have ended, under that name. A job sacct does not know, or
// knows as still pending or running (its end not yet recorded), is left
// out; so is a row of another job that once had the ID. Any failure is
// logged and answered with nothing: the caller keeps its old behaviour.
func (e *Executor) accounted(ctx context.Context, names map[int64]string) map[int64]jobState {
	if len(names) == 0 || !e.accountingOn(ctx) {
		return nil
	}
	ids := make([]string, 0, len(names))
	for id := range names {
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	out, err := e.command(ctx, "sacct", sacctArgs(ids)...)
	if err != nil {
		e.log.Warn("slurm executor: sacct failed; the jobs squeue no longer lists are known only from the step runners' records", "err", err)
		return nil
	}
	rows, err := parseSacct(out)
	if err != nil {
		e.log.Warn("slurm executor: sacct's output is not what qshare reads; the jobs squeue no longer lists are known only from the step runners' records", "err", err)
		return nil
	}
	m := map[int64]jobState{}
	for _, j := range rows {
		if name, ok := names[j.ID]; ok && j.Name == name && terminal(j.State) {
			m[j.ID] = j // a later row of the ID wins
		}
	}
	return m
}

// sacctArgs are sacct's arguments for the batch jobs ids, in sacctFormat.
func sacctArgs(ids []string) []string {
	return []string{"--allocations", "--noheader", "--parsable2", "--delimiter=" + sep,
		"--jobs=" + strings.Join(ids, ","), "--format=" + sacctFormat}
}

// parseSacct reads sacct output in sacctFormat, in sacct's order. The
// exit code "code:signal" becomes the wait status, as squeue's exit_code;
// a reason of "None" becomes "".
func parseSacct(out string) ([]jobState, error) {
	rows, err := splitRows("sacct", out, 5)
	if err != nil {
		return nil, err
	}
	var js []jobState
	for _, r := range rows {
		f := r.fields
		code, sig, ok := strings.Cut(strings.TrimSpace(f[2]), ":")
		c, cerr := strconv.Atoi(code)
		s, serr := strconv.Atoi(sig)
		if !ok || cerr != nil || serr != nil || c < 0 || c > 255 || s < 0 || s > 127 {
			return nil, fmt.Errorf("sacct printed the exit code %q; expected code:signal", f[2])
		}
		reason := strings.TrimSpace(f[3])
		if reason == "None" {
			reason = ""
		}
		js = append(js, jobState{ID: r.id, State: strings.TrimSpace(f[1]), Reason: reason, WaitStat: c<<8 | s, Name: f[4]})
	}
	return js, nil
}
