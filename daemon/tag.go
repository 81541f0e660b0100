package daemon

import (
	"context"

	"qshare"
	"qshare/store"
)

// Tags returns the tags of the resource or job with the given ARN.
func (d *Daemon) Tags(arn string) (map[string]string, error) {
	p, ok := d.parseARN(arn)
	if !ok {
		return nil, errNoResource(arn)
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	var tags map[string]string
	found := false
	switch p.kind {
	case kindEnvironment:
		if e := d.envs[p.name]; e != nil {
			tags, found = e.Tags, true
		}
	case kindPolicy:
		if x := d.policies[p.name]; x != nil {
			tags, found = x.Tags, true
		}
	case kindQueue:
		if x := d.queues[p.name]; x != nil {
			tags, found = x.Tags, true
		}
	case kindShare:
		if x := d.shares[store.ShareKey{Queue: p.queue, Name: p.name}]; x != nil {
			tags, found = x.Tags, true
		}
	case kindJob:
		if x := d.jobs[p.name]; x != nil {
			tags, found = x.Tags, true
		}
	}
	if !found {
		return nil, errNoResource(arn)
	}
	return cloneTags(tags), nil
}

func errNoResource(arn string) error {
	return qshare.Errorf(qshare.ENOTFOUND, "Resource %s does not exist: give the ARN of a service environment, job queue, scheduling policy, quota share or service job", arn)
}

// checkTagsOf checks the tags given to a resource of kind, at its creation
// or by TagResource: ValidateTags; a quota share's may set its minimum run
// time, whose value must be valid (qshare.TagMinRunTime); and only a
// service environment's may name its executor (qshare.TagExecutor).
func checkTagsOf(kind string, tags map[string]string) error {
	validate := qshare.ValidateTags
	if kind == kindShare {
		validate = qshare.ValidateShareTags
	}
	if err := validate("tags", tags); err != nil {
		return err
	}
	if _, ok := tags[qshare.TagExecutor]; ok && kind != kindEnvironment {
		return qshare.Errorf(qshare.EINVALID, "tags key %s names the executor of a service environment: it is not a tag of a %s", qshare.TagExecutor, kind)
	}
	return nil
}

// TagResource adds tags to a resource or job, replacing the values of keys
// it already has.
func (d *Daemon) TagResource(ctx context.Context, arn string, tags map[string]string) error {
	if len(tags) == 0 {
		return qshare.Errorf(qshare.EINVALID, "tags is required: give 1 to 50 tags")
	}
	kind := kindEnvironment // an ARN of no known kind: checked as tags that any resource takes, and then not found
	if p, ok := d.parseARN(arn); ok {
		kind = p.kind
	}
	if err := checkTagsOf(kind, tags); err != nil {
		return err
	}
	return d.retag(ctx, arn, func(old map[string]string) (map[string]string, error) {
		n := cloneTags(old)
		if n == nil {
			n = map[string]string{}
		}
		for k, v := range tags {
			n[k] = v
		}
		if len(n) > 50 {
			return nil, qshare.Errorf(qshare.EINVALID, "the resource would have %d tags: at most 50 are allowed; remove some with UntagResource first", len(n))
		}
		return n, nil
	})
}

// UntagResource removes tag keys from a resource or job; missing keys are ignored.
func (d *Daemon) UntagResource(ctx context.Context, arn string, keys []string) error {
	if len(keys) == 0 || len(keys) > 50 {
		return qshare.Errorf(qshare.EINVALID, "tagKeys has %d keys: give 1 to 50", len(keys))
	}
	for _, k := range keys {
		if qshare.ReservedTagKey(k) {
			return qshare.Errorf(qshare.EINVALID, "tagKeys %q is a system tag of qshare (prefix %s): it cannot be removed", k, qshare.SystemTagPrefix)
		}
	}
	return d.retag(ctx, arn, func(old map[string]string) (map[string]string, error) {
		n := cloneTags(old)
		for _, k := range keys {
			delete(n, k)
		}
		return n, nil
	})
}

func (d *Daemon) retag(ctx context.Context, arn string, f func(map[string]string) (map[string]string, error)) error {
	p, ok := d.parseARN(arn)
	if !ok {
		return errNoResource(arn)
	}
	if p.kind == kindJob {
		return d.command(ctx, func(c *cycle) error {
			if c.job(p.name) == nil {
				return errNoResource(arn)
			}
			tags, err := f(c.job(p.name).Tags)
			if err != nil {
				return err
			}
			c.edit(p.name).Tags = tags
			return nil
		})
	}
	d.resMu.Lock()
	defer d.resMu.Unlock()
	if p.kind == kindEnvironment {
		// A change of its executor has conditions (checkExecutorChange),
		// which ask the loop: before d.mu, which the loop takes to commit.
		if x := lookup(d, d.envs, p.name); x != nil {
			if tags, err := f(x.Tags); err == nil {
				if err := d.checkExecutorChange(ctx, x, tags); err != nil {
					return err
				}
			}
		}
	}
	d.mu.RLock()
	var ch store.Change
	var install, after func()
	var err error
	notFound := errNoResource(arn)
	switch p.kind {
	case kindEnvironment:
		if x := d.envs[p.name]; x != nil {
			n := *x
			if n.Tags, err = f(x.Tags); err == nil {
				ch.PutEnvironments = []qshare.ServiceEnvironment{n}
				install = func() { d.envs[n.Name] = &n }
			}
			notFound = nil
		}
	case kindPolicy:
		if x := d.policies[p.name]; x != nil {
			n := *x
			if n.Tags, err = f(x.Tags); err == nil {
				ch.PutPolicies = []qshare.SchedulingPolicy{n}
				install = func() { d.policies[n.Name] = &n }
			}
			notFound = nil
		}
	case kindQueue:
		if x := d.queues[p.name]; x != nil {
			n := *x
			if n.Tags, err = f(x.Tags); err == nil {
				ch.PutQueues = []qshare.JobQueue{n}
				install = func() { d.queues[n.Name] = &n }
			}
			notFound = nil
		}
	case kindShare:
		key := store.ShareKey{Queue: p.queue, Name: p.name}
		if x := d.shares[key]; x != nil {
			n := *x
			if n.Tags, err = f(x.Tags); err == nil {
				ch.PutShares = []qshare.QuotaShare{n}
				install = func() { d.shares[key] = &n }
				// Its tags may change its minimum run time
				// (qshare.TagMinRunTime): the engine takes the share
				// again, in the loop, unless it changed meanwhile.
				after = func() {
					d.post(op{kind: opCommand, reply: make(chan error, 1), fn: func(*cycle) error {
						if lookup(d, d.shares, key) == &n {
							return d.engineShare(&n)
						}
						return nil
					}})
				}
			}
			notFound = nil
		}
	}
	d.mu.RUnlock()
	if notFound != nil {
		return notFound
	}
	if err != nil {
		return err
	}
	if err := d.commit(ctx, &ch); err != nil {
		return err
	}
	d.mu.Lock()
	install()
	d.mu.Unlock()
	if after != nil {
		after()
	}
	d.log.Info("tags changed", "arn", arn)
	return nil
}
