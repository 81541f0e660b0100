package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/client"

	"qshare"
)

// PullPolicy says when the executor pulls an attempt's image (--pull).
type PullPolicy string

// Pull policies.
const (
	// PullMissing pulls an image the engine does not have; one it has is
	// never pulled again.
	PullMissing PullPolicy = "missing"
	// PullAlways pulls the image before every attempt (a tag that moves).
	PullAlways PullPolicy = "always"
	// PullNever never pulls: an image the engine lacks fails the attempt.
	PullNever PullPolicy = "never"
)

// ParsePull checks a --pull value; "" is PullMissing.
func ParsePull(s string) (PullPolicy, error) {
	switch p := PullPolicy(s); p {
	case "":
		return PullMissing, nil
	case PullMissing, PullAlways, PullNever:
		return p, nil
	}
	return "", qshare.Errorf(qshare.EINVALID, "--pull %q: give missing, always or never", s)
}

// pull pulls img for an attempt. While it pulls, the attempt's
// PendingReason and pull.log in its directory say how far it is. A pull
// that fails fails the attempt with SageMaker's kind of reason, not as a
// lack of capacity.
func (e *Executor) pull(ctx context.Context, attemptID, img string) error {
	defer e.progressDone(attemptID)
	e.progress(attemptID, "Pulling image "+img)
	auth, err := registryAuth(img)
	if err != nil {
		e.log.Warn("container executor: registry credentials", "image", img, "err", err)
	}
	resp, err := e.cli.ImagePull(ctx, img, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return errImageNotFound(img, err)
	}
	defer resp.Close()
	layers := map[string][2]int64{}
	for m, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return errImageNotFound(img, err)
		}
		if m.Error != nil {
			return errImageNotFound(img, fmt.Errorf("%s", m.Error.Message))
		}
		if m.Progress != nil && m.ID != "" && m.Progress.Total > 0 {
			layers[m.ID] = [2]int64{m.Progress.Current, m.Progress.Total}
			var cur, tot int64
			for _, l := range layers {
				cur += l[0]
				tot += l[1]
			}
			e.progress(attemptID, fmt.Sprintf("Pulling image: %.1f of %.1f GB", float64(cur)/1e9, float64(tot)/1e9))
		}
	}
	if _, err := e.cli.ImageInspect(ctx, img); err != nil {
		return errImageNotFound(img, err)
	}
	e.sawImage(img)
	return nil
}

// progress sets an attempt's progress (PendingReason) and, when it
// changed, appends it to pull.log in the attempt's directory.
func (e *Executor) progress(attemptID, msg string) {
	e.mu.Lock()
	changed := e.pending[attemptID] != msg
	e.pending[attemptID] = msg
	if changed {
		e.version++
	}
	e.mu.Unlock()
	if changed {
		e.appendLog(attemptID, msg)
	}
}

// progressDone ends an attempt's PendingReason.
func (e *Executor) progressDone(attemptID string) {
	e.mu.Lock()
	delete(e.pending, attemptID)
	e.version++
	e.mu.Unlock()
}

// appendLog adds a line of qshare's own to pull.log in the attempt's
// directory: what happened before its containers ran.
func (e *Executor) appendLog(attemptID, line string) {
	f, err := e.fs.OpenFile(filepath.Join(e.attemptDir(attemptID), "pull.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	f.WriteString(time.Now().UTC().Format(time.RFC3339) + " " + line + "\n")
	f.Close()
}

// PendingReasonsVersion changes whenever a pull's progress changes.
func (e *Executor) PendingReasonsVersion() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.version
}
