package data

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"qshare/fanout"
)

// Progress is how far a staging is: bytes written of the bytes to write.
type Progress struct {
	Done, Total int64
}

// String says it as SageMaker's status message does: "Downloading input
// data: 3.1 GB of 8.0 GB".
func (p Progress) String() string {
	return "Downloading input data: " + size(p.Done) + " of " + size(p.Total)
}

// size says n bytes in decimal units, one decimal.
func size(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f KB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}

// ProgressEvery is how often Stage reports progress while it downloads.
const ProgressEvery = time.Second

// object is one object to download and where it goes.
type object struct {
	loc  Location
	size int64
	dest string // absolute, beneath a channel's directory
}

// Stage downloads the plan's channels, in File mode, into their
// directories (Dirs.Channel): every object under an S3Prefix, or every
// object a ManifestFile lists, at its key below the prefix; this
// instance's share of them for ShardedByS3Key. It lists everything first,
// so that a missing bucket or prefix, a key that would land outside its
// channel's directory ("..", an absolute path), or more bytes than
// VolumeSizeInGB fail before a byte is written. Files are written through
// fsys, so a link planted in a channel's directory fails the staging
// instead of being written through. progress, if not nil, is called at
// least every ProgressEvery while bytes move, and once at the end. The
// error is an *Error ("ClientError: Data download failed: …").
func (c *Client) Stage(ctx context.Context, fsys FS, p Plan, progress func(Progress)) error {
	var all []object
	for _, ch := range p.Channels {
		objs, err := c.channelObjects(ctx, ch, p)
		if err != nil {
			return err
		}
		all = append(all, objs...)
	}
	var total int64
	for _, o := range all {
		total += o.size
	}
	if p.VolumeBytes > 0 && total > p.VolumeBytes {
		return clientError(downloadFailed, "the channels hold %s, more than the instance's storage volume (ResourceConfig.VolumeSizeInGB, %s): raise VolumeSizeInGB", size(total), size(p.VolumeBytes))
	}
	for _, ch := range p.Channels {
		if err := fsys.MkdirAll(p.Dirs.Channel(ch.Name), 0o755); err != nil {
			return fail(downloadFailed, "channel "+ch.Name, fsErr(err))
		}
	}
	return c.download(ctx, fsys, all, total, progress)
}

// download fetches objs, a few at a time, reporting progress.
func (c *Client) download(ctx context.Context, fsys FS, objs []object, total int64, progress func(Progress)) error {
	var done atomic.Int64
	report := func() {
		if progress != nil {
			progress(Progress{Done: done.Load(), Total: total})
		}
	}
	stop := make(chan struct{})
	var ticker sync.WaitGroup
	if progress != nil {
		ticker.Add(1)
		go func() {
			defer ticker.Done()
			t := time.NewTicker(ProgressEvery)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					report()
				case <-stop:
					return
				}
			}
		}()
	}
	err := c.each(ctx, downloadFailed, len(objs), func(ctx context.Context, i int) error {
		return c.get(ctx, fsys, objs[i], &done)
	})
	close(stop)
	ticker.Wait()
	if err != nil {
		return err
	}
	report()
	return nil
}

// each runs fn for 0..n-1, c.concurrency at a time, and returns the first
// error (the others are cancelled); what (downloadFailed, uploadFailed)
// names a cancellation.
func (c *Client) each(ctx context.Context, what string, n int, fn func(ctx context.Context, i int) error) error {
	err := fanout.Each(ctx, min(c.concurrency, n), n, fn)
	if err == nil && ctx.Err() != nil {
		return fail(what, "", ctx.Err())
	}
	return err
}

// get downloads one object into its file, created through fsys.
func (c *Client) get(ctx context.Context, fsys FS, o object, done *atomic.Int64) error {
	if err := fsys.MkdirAll(path.Dir(o.dest), 0o755); err != nil {
		return fail(downloadFailed, o.loc.String(), fsErr(err))
	}
	f, err := fsys.OpenFile(o.dest, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fail(downloadFailed, o.loc.String(), fsErr(err))
	}
	defer f.Close()
	if o.size == 0 {
		return nil
	}
	w := &countingWriterAt{w: f, n: done}
	_, err = c.tm.DownloadObject(ctx, &transfermanager.DownloadObjectInput{Bucket: aws.String(o.loc.Bucket), Key: aws.String(o.loc.Key), WriterAt: w})
	if err != nil {
		return fail(downloadFailed, o.loc.String(), err)
	}
	return f.Close()
}

// countingWriterAt counts the bytes written, for the progress.
type countingWriterAt struct {
	w io.WriterAt
	n *atomic.Int64
}

func (c *countingWriterAt) WriteAt(p []byte, off int64) (int, error) {
	n, err := c.w.WriteAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// channelObjects lists a channel's objects, this instance's share of
// them, and where each goes.
func (c *Client) channelObjects(ctx context.Context, ch ChannelPlan, p Plan) ([]object, error) {
	where := fmt.Sprintf("channel %s (%s)", ch.Name, ch.Source)
	var objs []object
	switch ch.Type {
	case ManifestFile:
		var err error
		if objs, err = c.manifest(ctx, ch.Source); err != nil {
			return nil, fail(downloadFailed, where, err)
		}
	default:
		list, err := c.list(ctx, ch.Source)
		if err != nil {
			return nil, fail(downloadFailed, where, err)
		}
		if len(list) == 0 {
			return nil, clientError(downloadFailed, "%s: no objects under the prefix: please ensure that the S3 prefix exists and holds objects", where)
		}
		for _, o := range list {
			o.dest = strings.TrimPrefix(o.loc.Key, ch.Source.Key)
			if !strings.HasSuffix(ch.Source.Key, "/") && ch.Source.Key != "" {
				o.dest = strings.TrimPrefix(o.dest, "/")
			}
			objs = append(objs, o)
		}
	}
	// S3 lists in key order; a manifest in its own. Sharding splits the
	// keys in S3's order, so that every instance computes the same split.
	sort.Slice(objs, func(i, j int) bool { return objs[i].loc.Key < objs[j].loc.Key })
	var out []object
	for i, o := range objs {
		if ch.Sharded && i%p.Instances != p.Instance {
			continue
		}
		if strings.HasSuffix(o.dest, "/") && o.size == 0 {
			continue // a folder's marker
		}
		rel, err := keyPath(o.dest)
		if err != nil {
			return nil, clientError(downloadFailed, "%s: object %q %v, outside the channel's directory", where, cut(o.loc.Key), err)
		}
		o.dest = path.Join(p.Dirs.Channel(ch.Name), rel)
		out = append(out, o)
	}
	return out, nil
}

// keyPath checks the part of a key below its prefix as a relative path:
// no empty, "." or ".." component, not absolute, no NUL.
func keyPath(rel string) (string, error) {
	switch {
	case rel == "":
		return "", fmt.Errorf("has no name below the prefix")
	case strings.HasPrefix(rel, "/"):
		return "", fmt.Errorf("would land at an absolute path")
	case strings.ContainsRune(rel, 0):
		return "", fmt.Errorf("holds a NUL byte")
	}
	for _, part := range strings.Split(rel, "/") {
		switch part {
		case "..":
			return "", fmt.Errorf("has a '..' component")
		case "", ".":
			return "", fmt.Errorf("has an empty or '.' component")
		}
	}
	return rel, nil
}

// list returns every object under loc's prefix, in key order.
func (c *Client) list(ctx context.Context, loc Location) ([]object, error) {
	var out []object
	pg := s3.NewListObjectsV2Paginator(c.s3, &s3.ListObjectsV2Input{Bucket: aws.String(loc.Bucket), Prefix: aws.String(loc.Key)})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			out = append(out, object{loc: Location{Bucket: loc.Bucket, Key: aws.ToString(o.Key)}, size: aws.ToInt64(o.Size)})
		}
	}
	return out, nil
}

// MaxManifestBytes bounds a manifest file.
const MaxManifestBytes = 64 << 20

// manifest reads a ManifestFile: a JSON array whose first element is
// {"prefix": "s3://bucket/prefix/"} and whose others are keys relative to
// it. Each object is headed for its size.
func (c *Client) manifest(ctx context.Context, loc Location) ([]object, error) {
	out, err := c.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, MaxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxManifestBytes {
		return nil, clientError(downloadFailed, "the manifest %s is larger than %s", loc, size(MaxManifestBytes))
	}
	var items []json.RawMessage
	bad := func(why string) error {
		return clientError(downloadFailed, "the manifest %s is not a SageMaker manifest (%s): give [{\"prefix\": \"s3://bucket/prefix/\"}, \"key1\", …]", loc, why)
	}
	if json.Unmarshal(b, &items) != nil || len(items) == 0 {
		return nil, bad("not a JSON array")
	}
	var head struct {
		Prefix string `json:"prefix"`
	}
	if json.Unmarshal(items[0], &head) != nil || head.Prefix == "" {
		return nil, bad("its first element has no prefix")
	}
	base, err := ParseURI(head.Prefix)
	if err != nil {
		return nil, bad(err.Error())
	}
	var objs []object
	for _, raw := range items[1:] {
		var rel string
		if json.Unmarshal(raw, &rel) != nil {
			return nil, bad("an element after the first is not a string")
		}
		key := base.Key + rel
		h, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(base.Bucket), Key: aws.String(key)})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Location{base.Bucket, key}, err)
		}
		objs = append(objs, object{loc: Location{Bucket: base.Bucket, Key: key}, size: aws.ToInt64(h.ContentLength), dest: rel})
	}
	return objs, nil
}

// localError is a failure of the job's directory (a link or a file in
// the way, a full disk): the job's doing, said without the server's paths.
type localError struct{ err error }

func (e *localError) Error() string {
	var pe *os.PathError
	if errors.As(e.err, &pe) {
		return pe.Op + " " + path.Base(pe.Path) + ": " + pe.Err.Error()
	}
	return e.err.Error()
}
func (e *localError) Unwrap() error { return e.err }

func fsErr(err error) error { return &localError{err} }
