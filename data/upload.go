package data

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/smithy-go"
	"github.com/klauspost/compress/gzip"
)

// file is a regular file found under a directory.
type file struct {
	rel     string // below the directory, with '/'
	size    int64
	modTime time.Time
	mode    fs.FileMode
}

// walk lists the regular files under dir, in name order, through fsys:
// links and other special files are left out (never followed), and a
// directory that does not exist holds nothing.
func walk(fsys FS, dir string) ([]file, error) {
	var out []file
	var rec func(rel string) error
	rec = func(rel string) error {
		ents, err := fsys.ReadDir(path.Join(dir, rel))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && rel == "" {
				return nil
			}
			return err
		}
		sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
		for _, e := range ents {
			r := path.Join(rel, e.Name())
			switch {
			case e.IsDir():
				if err := rec(r); err != nil {
					return err
				}
			case e.Type().IsRegular():
				info, err := e.Info()
				if err != nil {
					continue // gone since the listing
				}
				out = append(out, file{rel: r, size: info.Size(), modTime: info.ModTime(), mode: info.Mode()})
			}
		}
		return nil
	}
	return out, rec("")
}

// Upload puts the attempt's model and output in S3, as SageMaker does when
// the program has exited (whatever its exit code, after a stop too):
// Dirs.Model as <Output>/model.tar.gz (or, with CompressionType NONE, each
// file at <Output>/model/<path>), and Dirs.OutputData as
// <Output>/output.tar.gz. Files are read through fsys, without following
// links (links are left out). A plan without an output location uploads
// nothing. The error is an *Error ("ClientError: Artifact upload failed:
// …").
func (c *Client) Upload(ctx context.Context, fsys FS, p Plan) error {
	if p.Output == nil {
		return nil
	}
	if p.Compress {
		if err := c.putTarGz(ctx, fsys, p.Dirs.Model, Location{p.Output.Bucket, joinKey(p.Output.Key, "model.tar.gz")}); err != nil {
			return err
		}
	} else {
		if _, err := c.putFiles(ctx, fsys, p.Dirs.Model, Location{p.Output.Bucket, joinKey(p.Output.Key, "model")}, nil); err != nil {
			return err
		}
	}
	return c.putTarGz(ctx, fsys, p.Dirs.OutputData, Location{p.Output.Bucket, joinKey(p.Output.Key, "output.tar.gz")})
}

// putTarGz streams dir as a gzipped tar into one object: the SDK's
// multipart upload takes it part by part, so nothing of it waits on disk.
func (c *Client) putTarGz(ctx context.Context, fsys FS, dir string, to Location) error {
	files, err := walk(fsys, dir)
	if err != nil {
		return fail(uploadFailed, path.Base(dir), fsErr(err))
	}
	err = c.whole(ctx, func() error {
		pr, pw := io.Pipe()
		go func() {
			pw.CloseWithError(writeTarGz(pw, fsys, dir, files))
		}()
		_, err := c.tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String(to.Bucket), Key: aws.String(to.Key), Body: pr})
		pr.CloseWithError(errors.New("upload ended"))
		return err
	})
	if err != nil {
		return fail(uploadFailed, to.String(), err)
	}
	return nil
}

// ObjectTries is how many times an upload sends one object from its
// start, when the store lost it midway: each try is a whole upload (every
// request of it tried MaxAttempts times), so a store that restarts during
// a multipart upload, and forgets it (NoSuchUpload), or that is down for
// longer than one request's retries, gets the object again from its first
// byte. The object's key holds nothing of a try that failed: S3 shows an
// object only once its upload is complete.
const ObjectTries = 3

// objectPause is the wait between two tries of one object.
var objectPause = 2 * time.Second

// whole runs put, one whole upload of an object, up to ObjectTries times
// while it fails because the store lost the upload or did not answer.
func (c *Client) whole(ctx context.Context, put func() error) error {
	for try := 1; ; try++ {
		err := put()
		if err == nil || try == ObjectTries || !lostUpload(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(objectPause):
		}
	}
}

// lostUpload reports whether err is the store's, not the job's: no answer
// (after the SDK's own retries), a 5xx, or a multipart upload the store no
// longer knows (NoSuchUpload: it restarted).
func lostUpload(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "NoSuchUpload" {
		return true
	}
	client, _ := classify(err)
	return !client
}

// writeTarGz writes files (found under dir) as a gzipped tar to w.
func writeTarGz(w io.Writer, fsys FS, dir string, files []file) error {
	// gzip is what bounds a model's upload: it runs on one core, ahead of
	// the parallel parts. klauspost/compress writes the same format as
	// compress/gzip, and at BestSpeed it stores the blocks that do not
	// compress (random weights hardly do) instead of coding them: about
	// ten times compress/gzip's BestSpeed on such data (docs/data.md).
	zw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := addFile(tw, fsys, dir, f); err != nil {
			return fsErr(err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// addFile writes one file to tw, as long as it was when opened: a file
// that grows meanwhile is cut, one that shrinks is padded with zeros, so
// that the archive stays whole.
func addFile(tw *tar.Writer, fsys FS, dir string, f file) error {
	fh, err := fsys.OpenFile(path.Join(dir, f.rel), os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the listing
		}
		return err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.rel, Size: st.Size(), Mode: int64(st.Mode().Perm()), ModTime: st.ModTime(), Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	n, err := io.Copy(tw, io.LimitReader(fh, st.Size()))
	if err != nil {
		return err
	}
	if n < st.Size() {
		_, err = io.CopyN(tw, zeros{}, st.Size()-n)
	}
	return err
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// putFiles uploads each regular file under dir to to/<path>, those whose
// size or time differ from seen's entry when seen is not nil, and returns
// what it uploaded.
func (c *Client) putFiles(ctx context.Context, fsys FS, dir string, to Location, seen map[string]file) ([]file, error) {
	files, err := walk(fsys, dir)
	if err != nil {
		return nil, fail(uploadFailed, path.Base(dir), fsErr(err))
	}
	var todo []file
	for _, f := range files {
		if old, ok := seen[f.rel]; seen != nil && ok && old.size == f.size && old.modTime.Equal(f.modTime) {
			continue
		}
		todo = append(todo, f)
	}
	err = c.each(ctx, uploadFailed, len(todo), func(ctx context.Context, i int) error {
		f := todo[i]
		fh, err := fsys.OpenFile(path.Join(dir, f.rel), os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fail(uploadFailed, f.rel, fsErr(err))
		}
		defer fh.Close()
		key := joinKey(to.Key, f.rel)
		err = c.whole(ctx, func() error {
			if _, err := fh.Seek(0, io.SeekStart); err != nil {
				return err
			}
			_, err := c.tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String(to.Bucket), Key: aws.String(key), Body: fh})
			return err
		})
		if err != nil {
			return fail(uploadFailed, Location{to.Bucket, key}.String(), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return todo, nil
}

// RestoreCheckpoints fills Dirs.Checkpoint from the plan's checkpoint
// location before the program starts: every object under it, at its key
// below the prefix, as a channel is staged (the same checks). A location
// that holds nothing yet (a first attempt) is no error.
func (c *Client) RestoreCheckpoints(ctx context.Context, fsys FS, p Plan) error {
	if p.Checkpoints == nil {
		return nil
	}
	prefix := *p.Checkpoints
	if prefix.Key != "" && prefix.Key[len(prefix.Key)-1] != '/' {
		prefix.Key += "/"
	}
	list, err := c.list(ctx, prefix)
	if err != nil {
		return fail(downloadFailed, "checkpoints ("+prefix.String()+")", err)
	}
	var objs []object
	for _, o := range list {
		rel := o.loc.Key[len(prefix.Key):]
		if rel == "" || (rel[len(rel)-1] == '/' && o.size == 0) {
			continue
		}
		if _, err := keyPath(rel); err != nil {
			return clientError(downloadFailed, "checkpoints (%s): object %q %v, outside the checkpoint directory", prefix, cut(o.loc.Key), err)
		}
		o.dest = path.Join(p.Dirs.Checkpoint, rel)
		objs = append(objs, o)
	}
	if err := fsys.MkdirAll(p.Dirs.Checkpoint, 0o755); err != nil {
		return fail(downloadFailed, "checkpoints", fsErr(err))
	}
	return c.download(ctx, fsys, objs, 0, nil)
}

// Checkpointer copies a checkpoint directory to S3 as it changes: each
// Save uploads the files that are new or whose size or time changed since
// the last Save that succeeded. Deleted files stay in S3, as SageMaker
// leaves them. It is safe for concurrent use (Saves take turns).
type Checkpointer struct {
	c    *Client
	fsys FS
	p    Plan
	mu   sync.Mutex
	seen map[string]file
}

// NewCheckpointer returns a Checkpointer for the plan's checkpoints.
func (c *Client) NewCheckpointer(fsys FS, p Plan) *Checkpointer {
	return &Checkpointer{c: c, fsys: fsys, p: p, seen: map[string]file{}}
}

// Save uploads what changed in Dirs.Checkpoint to the plan's checkpoint
// location, and returns how many files it uploaded. Without a checkpoint
// location it does nothing.
func (k *Checkpointer) Save(ctx context.Context) (int, error) {
	if k.p.Checkpoints == nil {
		return 0, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	put, err := k.c.putFiles(ctx, k.fsys, k.p.Dirs.Checkpoint, *k.p.Checkpoints, k.seen)
	for _, f := range put {
		k.seen[f.rel] = f
	}
	return len(put), err
}

// Keep calls Save every interval until ctx ends; it returns nothing, and
// tells onErr (if not nil) of each Save that failed: the next one tries
// again.
func (k *Checkpointer) Keep(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := k.Save(ctx); err != nil && ctx.Err() == nil && onErr != nil {
				onErr(err)
			}
		}
	}
}
