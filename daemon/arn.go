package daemon

import (
	"strings"

	"qshare"
)

// ARN kinds, as they appear after "arn:aws:batch:<region>:<account>:".
const (
	kindEnvironment = "service-environment"
	kindQueue       = "job-queue"
	kindPolicy      = "scheduling-policy"
	kindJob         = "service-job"
	kindShare       = "quota-share" // job-queue/<queue>/quota-share/<name>
)

func (d *Daemon) arnPrefix() string {
	return "arn:aws:batch:" + d.cfg.Region + ":" + d.cfg.AccountID + ":"
}

// EnvironmentARN returns the ARN of the service environment named name.
func (d *Daemon) EnvironmentARN(name string) string {
	return d.arnPrefix() + kindEnvironment + "/" + name
}

// QueueARN returns the ARN of the job queue named name.
func (d *Daemon) QueueARN(name string) string { return d.arnPrefix() + kindQueue + "/" + name }

// PolicyARN returns the ARN of the scheduling policy named name.
func (d *Daemon) PolicyARN(name string) string { return d.arnPrefix() + kindPolicy + "/" + name }

// ShareARN returns the ARN of quota share name in job queue queue.
func (d *Daemon) ShareARN(queue, name string) string {
	return d.QueueARN(queue) + "/" + kindShare + "/" + name
}

// JobARN returns the ARN of the service job with the given ID.
func (d *Daemon) JobARN(id string) string { return d.arnPrefix() + kindJob + "/" + id }

// JobShareARN returns the ARN of the quota share j was submitted to, or
// of its job queue when it has no quota share: with the job's own ARN, the
// resource an authorization check of an operation on j names.
func (d *Daemon) JobShareARN(j *qshare.Job) string {
	if j.QuotaShare == "" {
		return d.QueueARN(j.JobQueue)
	}
	return d.ShareARN(j.JobQueue, j.QuotaShare)
}

// parsedARN is an ARN of this server split into its kind and names.
type parsedARN struct {
	kind  string
	name  string // resource name, or job ID
	queue string // for a quota share
}

// parseARN splits an ARN of this server (this region and account). ok is
// false for anything else, including ARNs of another region or account.
func (d *Daemon) parseARN(arn string) (p parsedARN, ok bool) {
	rest, found := strings.CutPrefix(arn, d.arnPrefix())
	if !found {
		return p, false
	}
	kind, name, found := strings.Cut(rest, "/")
	if !found || name == "" {
		return p, false
	}
	if kind == kindQueue {
		if q, s, isShare := strings.Cut(name, "/"+kindShare+"/"); isShare {
			if q == "" || s == "" || strings.Contains(s, "/") {
				return p, false
			}
			return parsedARN{kind: kindShare, queue: q, name: s}, true
		}
	}
	if strings.Contains(name, "/") {
		return p, false
	}
	return parsedARN{kind: kind, name: name}, true
}

// refName turns a name-or-ARN reference to a resource of the given kind into
// a name. An ARN of another kind, region or account is an EINVALID error that
// says what was expected.
func (d *Daemon) refName(field, kind, ref string) (string, error) {
	return d.resolveRef(field, kind, ref, "", kind, "the name", "NAME")
}

// jobRef turns a job ID or job ARN into a job ID.
func (d *Daemon) jobRef(field, ref string) (string, error) {
	return d.resolveRef(field, kindJob, ref, ": give the job ID or the job ARN", "service job", "the job ID", "JOB_ID")
}

// resolveRef is refName and jobRef: ref is the name itself, or an ARN of
// this server of the given kind whose name it returns. The errors say that
// field is required (and how to give it), or that ref is not what an
// ARN of kind (called what) looks like: use, or the ARN ending in id.
func (d *Daemon) resolveRef(field, kind, ref, how, what, use, id string) (string, error) {
	if ref == "" {
		return "", qshare.Errorf(qshare.EINVALID, "%s is required%s", field, how)
	}
	if !strings.HasPrefix(ref, "arn:") {
		return ref, nil
	}
	p, ok := d.parseARN(ref)
	if !ok || p.kind != kind {
		return "", qshare.Errorf(qshare.EINVALID, "%s %q is not a %s ARN of this server: use %s, or an ARN of the form %s", field, ref, what, use, d.arnPrefix()+kind+"/"+id)
	}
	return p.name, nil
}
