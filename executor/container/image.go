package container

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
// lack of capacity, and pull.log ends with that reason.
func (e *Executor) pull(ctx context.Context, attemptID, img string) error {
	defer e.progressDone(attemptID)
	e.progress(attemptID, "Pulling image "+img)
	err := e.pullImage(ctx, attemptID, img)
	if err != nil && ctx.Err() == nil {
		e.appendLog(attemptID, err.Error())
	}
	return err
}

func (e *Executor) pullImage(ctx context.Context, attemptID, img string) error {
	auth, err := registryAuth(img)
	if err != nil {
		e.log.Warn("container executor: registry credentials", "image", img, "err", err)
	}
	resp, err := e.cli.ImagePull(ctx, img, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return errImageNotFound(img, err)
	}
	defer resp.Close()
	var p pullProgress
	for m, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return errImageNotFound(img, err)
		}
		if m.Error != nil {
			return errImageNotFound(img, fmt.Errorf("%s", m.Error.Message))
		}
		var cur, total int64
		if m.Progress != nil {
			cur, total = m.Progress.Current, m.Progress.Total
		}
		if msg := p.add(m.ID, m.Status, cur, total); msg != "" {
			e.progress(attemptID, msg)
		}
	}
	if _, err := e.cli.ImageInspect(ctx, img); err != nil {
		return errImageNotFound(img, err)
	}
	e.sawImage(img)
	return nil
}

// pullProgress sums the download of a pull's layers from the engine's
// messages: each layer's bytes downloaded of its size (Docker Engine's
// "Downloading", Podman's "Copying blob"), its whole size once the engine
// says it is downloaded. The progress of a layer's extraction, which
// starts again from 0, is not a download's and is passed over.
type pullProgress struct {
	layers map[string][2]int64
	order  []string
}

// add takes a message of layer id and returns the progress to show, or ""
// where there is none (yet).
func (p *pullProgress) add(id, status string, cur, total int64) string {
	if id == "" {
		return ""
	}
	if p.layers == nil {
		p.layers = map[string][2]int64{}
	}
	l, known := p.layers[id]
	switch {
	case total > 0 && (strings.HasPrefix(status, "Downloading") || strings.HasPrefix(status, "Copying blob")):
		l = [2]int64{min(cur, total), total}
	case known && (status == "Download complete" || status == "Verifying Checksum" || status == "Pull complete" || status == "Already exists"):
		l[0] = l[1]
	default:
		return ""
	}
	if !known {
		p.order = append(p.order, id)
	}
	p.layers[id] = l
	var sum [2]int64
	for _, id := range p.order {
		sum[0] += p.layers[id][0]
		sum[1] += p.layers[id][1]
	}
	return "Pulling image: " + ofBytes(sum[0], sum[1])
}

// ofBytes says "3.2 of 9.8 GB", in the unit of total: GB, MB or kB.
func ofBytes(n, total int64) string {
	unit, scale := "kB", 1e3
	switch {
	case total >= 1e9:
		unit, scale = "GB", 1e9
	case total >= 1e6:
		unit, scale = "MB", 1e6
	}
	return fmt.Sprintf("%.1f of %.1f %s", float64(n)/scale, float64(total)/scale, unit)
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
