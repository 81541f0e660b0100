package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"qshare"
	"qshare/executor"
)

// What the executor tells the daemon beside the attempts' ends: why an
// attempt waits in Slurm, whether slurmctld answers, and which batch jobs
// are qshare's without a record in the store.

var (
	_ executor.PendingReasoner = (*Executor)(nil)
	_ executor.HealthReporter  = (*Executor)(nil)
	_ executor.Sweeper         = (*Executor)(nil)
)

// PendingReason returns Slurm's reason (squeue's %r: Resources, Priority,
// ReqNodeNotAvail, JobHeldAdmin, …) for an attempt whose batch job was
// PENDING at the last poll, else "".
func (e *Executor) PendingReason(attemptID string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.attempts[attemptID]
	if a == nil || a.Ended || a.state != "PENDING" {
		return ""
	}
	select {
	case <-a.Ready:
	default:
		return ""
	}
	if a.reason == "" || a.reason == "None" {
		return "PENDING"
	}
	return a.reason
}

// healthCheckEvery is how often an executor with no attempt to poll asks
// slurmctld whether it answers (scontrol ping).
const healthCheckEvery = 5 * time.Second

// Health returns "" while slurmctld answers, else what the last Slurm
// command said and since when: the attempts keep their state and
// capacity meanwhile, and starts fail and are retried.
func (e *Executor) Health() string {
	e.hmu.Lock()
	defer e.hmu.Unlock()
	if e.trouble == "" {
		return ""
	}
	return fmt.Sprintf("slurmctld does not answer since %s (%s): running attempts keep their state and capacity, and new attempts wait until it answers again",
		e.troubleSince.Format(time.RFC3339), e.trouble)
}

// noteCommand records whether a Slurm command reached slurmctld: a
// command that timed out or could not contact the controller makes the
// executor unhealthy; any command that succeeded makes it healthy.
func (e *Executor) noteCommand(name string, err error) {
	e.hmu.Lock()
	defer e.hmu.Unlock()
	e.lastCheck = time.Now()
	if err == nil {
		if e.trouble != "" {
			e.log.Info("slurm executor: slurmctld answers again", "down since", e.troubleSince)
		}
		e.trouble = ""
		return
	}
	msg := err.Error()
	if !controllerDown(msg) {
		return // a refusal of one request (a bad job ID, say), not an outage
	}
	if e.trouble == "" {
		e.troubleSince = time.Now().UTC()
		e.log.Warn("slurm executor: slurmctld does not answer", "command", name, "err", msg)
	}
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	e.trouble = msg
}

// controllerDown reports whether a Slurm command's error says that it
// could not reach slurmctld: the time limit ran out, or the client's own
// words for a refused or lost connection.
func controllerDown(msg string) bool {
	for _, s := range []string{"did not answer within", "Unable to contact slurm controller", "Socket timed out", "Connection refused", "Zero Bytes were transmitted", "is DOWN"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// checkHealth asks slurmctld whether it answers when no other command has
// told for a while (no attempt runs, so nothing is polled).
func (e *Executor) checkHealth() {
	e.hmu.Lock()
	due := time.Since(e.lastCheck) >= healthCheckEvery
	e.hmu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.o.CommandTimeout)
	defer cancel()
	// scontrol ping says DOWN on its standard output (and exits 1), which
	// the command's error does not carry.
	if out, err := e.command(ctx, "scontrol", "ping"); err != nil && strings.Contains(out, "DOWN") {
		first, _, _ := strings.Cut(strings.TrimSpace(out), "\n") // the rest is a banner
		e.noteCommand("scontrol", fmt.Errorf("scontrol ping: %s", first))
	}
}

// Sweep cancels the batch jobs of this shared directory (their comment
// carries its tag) that Slurm has not ended and whose attempt is neither
// in keep nor started or recovered through this executor: a job left by
// an attempt that the store does not know, which nobody would wait for.
// It returns the attempt IDs of the jobs it cancelled.
func (e *Executor) Sweep(ctx context.Context, keep map[string]bool) ([]string, error) {
	out, err := e.command(ctx, "squeue", "--noheader", "--states=all", "--Format="+squeueFormat)
	if err != nil {
		return nil, qshare.Errorf(qshare.EINTERNAL, "slurm executor: listing the batch jobs to sweep: %v", err)
	}
	m, err := parseSqueue(out)
	if err != nil {
		return nil, err
	}
	prefix := "qshare " + e.tag + " "
	var swept []string
	for id, j := range m {
		attemptID, ok := strings.CutPrefix(j.Comment, prefix)
		if !ok || terminal(j.State) || keep[attemptID] {
			continue
		}
		e.mu.Lock()
		_, mine := e.attempts[attemptID]
		e.mu.Unlock()
		if mine {
			continue
		}
		if _, err := e.command(ctx, "scancel", strconv.FormatInt(id, 10)); err != nil {
			return swept, qshare.Errorf(qshare.EINTERNAL, "slurm executor: cancelling the stray batch job %d of attempt %s: %v", id, attemptID, err)
		}
		e.log.Warn("slurm executor: cancelled a batch job whose attempt the store does not know", "slurmJob", id, "attempt", attemptID)
		swept = append(swept, attemptID)
	}
	return swept, nil
}
