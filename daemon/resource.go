package daemon

import (
	"context"
	"sort"
	"time"

	"qshare"
	"qshare/store"
)

// The resource operations live one file per resource: environment.go,
// policy.go, queue.go and share.go; this file holds what they share. Each
// operation validates against the in-memory state under resMu, commits the
// new record and installs it in memory. A service environment, job queue or
// quota share is committed CREATING or UPDATING and settles VALID once the
// control loop has applied it to the engine (lifecycle.go); a scheduling
// policy has no status and is in force at once.

const serviceTypeSageMaker = "SAGEMAKER_TRAINING"

func errExists() error { return qshare.Errorf(qshare.EINVALID, "Object already exists") }

// lookup returns m[k], read under d.mu. m is one of the daemon's resource
// maps, which d.mu guards.
func lookup[K comparable, T any](d *Daemon, m map[K]*T, k K) *T {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return m[k]
}

// install sets m[k] to v under d.mu.
func install[K comparable, T any](d *Daemon, m map[K]*T, k K, v *T) {
	d.mu.Lock()
	m[k] = v
	d.mu.Unlock()
}

// commitPut commits c, which stores v, and only then installs v as m[k]:
// memory never shows what the store may not have.
func commitPut[K comparable, T any](ctx context.Context, d *Daemon, c *store.Change, m map[K]*T, k K, v *T) error {
	if err := d.commit(ctx, c); err != nil {
		return err
	}
	install(d, m, k, v)
	return nil
}

// commitForget commits c, which deletes the record m[k], and only then
// deletes it from memory under d.mu.
func commitForget[K comparable, T any](ctx context.Context, d *Daemon, c *store.Change, m map[K]*T, k K) error {
	if err := d.commit(ctx, c); err != nil {
		return err
	}
	d.mu.Lock()
	delete(m, k)
	d.mu.Unlock()
	return nil
}

// lockChanges takes resMu for a change that the control loop must settle,
// and so only once the daemon has started; the caller unlocks resMu.
func (d *Daemon) lockChanges() error {
	if !d.started {
		return errNotStarted()
	}
	d.resMu.Lock()
	return nil
}

// validateNewState checks the new value of an optional state member; nil
// leaves the state as it is.
func validateNewState(field string, s *qshare.State) error {
	if s == nil {
		return nil
	}
	return qshare.ValidateState(field, *s, false)
}

// queuesUsing returns, in name order, the names of the job queues for which
// uses is true: those that stand in the way of deleting a resource they use.
// Callers hold d.mu.
func (d *Daemon) queuesUsing(uses func(q *qshare.JobQueue) bool) []string {
	var names []string
	for _, q := range d.queues {
		if uses(q) {
			names = append(names, q.Name)
		}
	}
	sort.Strings(names)
	return names
}

func orEnabled(s qshare.State) qshare.State {
	if s == "" {
		return qshare.Enabled
	}
	return s
}

// listByRefs returns copies of the records of m (keyed by name) that refs
// name (names or ARNs of kind; unknown ones are left out, repeats are given
// once), or of every record when refs is empty, in name order. field names
// refs in the error for a ref of another kind. It takes d.mu for reading.
func listByRefs[T any](d *Daemon, m map[string]*T, field, kind string, refs []string) ([]T, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var names []string
	if len(refs) == 0 {
		for n := range m {
			names = append(names, n)
		}
	} else {
		seen := map[string]bool{}
		for _, r := range refs {
			n, err := d.refName(field, kind, r)
			if err != nil {
				return nil, err
			}
			if m[n] != nil && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	var out []T
	for _, n := range names {
		out = append(out, *m[n])
	}
	return out, nil
}

// drain terminates the unfinished jobs of a queue (and share, if not ""),
// waits in the background until every one of them has stopped, and then
// runs finish with resMu held.
func (d *Daemon) drain(queue, share, reason string, finish func(context.Context)) {
	d.bg.Go(func() {
		ctx := d.lctx
		for {
			d.mu.RLock()
			var ids []string
			if x := d.byQueue[queue]; x != nil {
				for _, k := range x.ids {
					if j := d.jobs[k.id]; j != nil && !j.Status.Terminal() && (share == "" || j.QuotaShare == share) {
						ids = append(ids, k.id)
					}
				}
			}
			d.mu.RUnlock()
			if len(ids) == 0 {
				break
			}
			_ = d.command(ctx, func(c *cycle) error {
				for _, id := range ids {
					c.terminate(id, reason)
				}
				return nil
			})
			select {
			case <-ctx.Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
		d.resMu.Lock()
		defer d.resMu.Unlock()
		finish(ctx)
	})
}
