package s3

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"hash/fnv"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"
)

// How objects are written. gofakes3's file backend wrote a PutObject's
// body under the lock that lets one write through at a time, hashed it
// again after gofakes3 had, and synced it there. Here a body is written
// to a file of its own under tmp/ while it comes, outside any lock, by
// as many PutObjects as come at once; only once it is whole and synced
// does the commit, under the store's lock, rename it into place and
// write its metadata, as a completed multipart upload's object is. A body
// that ends short, fails gofakes3's Content-MD5 check or authentication's
// check of its hash, or cannot be written leaves nothing under its key.

// wholeBackend is gofakes3's file backend with the objects' writes, and
// the reads that must not see one half-done, under a lock of its own.
type wholeBackend struct {
	*s3afero.MultiBucketBackend
	*uploads
	fs   *atomicFs
	root string
	// objects is held to commit an object (its data renamed into place,
	// then its metadata written) or delete one, and read-held to read
	// one: a read between the two steps of a commit would find the data
	// and metadata apart, and the backend then writes the metadata again,
	// with a hash of its own.
	objects sync.RWMutex
	// syncDir makes a directory's entries durable (syncDirectory; a test
	// watches or fails it).
	syncDir func(dir string) error
	// crashAt, set by a test, stops a commit at the named step, as a
	// crash there would, when it returns true; nil in the product.
	crashAt func(step string) bool
	// sent holds, by the token in a PutObject's metadata (sentKey), the
	// checksum that its request sent (Server.ServeHTTP puts it there):
	// gofakes3 gives PutObject the headers, not the request, and a
	// trailer's checksum is known only once the body is read.
	sent   sync.Map // string -> *sentChecksum
	tokens atomic.Uint64
}

// sentKey is the header, and so the metadata entry, that carries a
// PutObject's token in sent to the backend; a client's is dropped.
const sentKey = "X-Amz-Qshare-Sent-Checksum"

// expect keeps sent for the PutObject or CopyObject of r, and returns
// the function that forgets it once the request is answered.
func (b *wholeBackend) expect(r *http.Request, sent *sentChecksum) func() {
	tok := strconv.FormatUint(b.tokens.Add(1), 10)
	b.sent.Store(tok, sent)
	r.Header.Set(sentKey, tok)
	return func() { b.sent.Delete(tok) }
}

// takeSent is the checksum that the request of a PutObject of meta sent
// (nil for none), its token taken out of meta.
func (b *wholeBackend) takeSent(meta map[string]string) *sentChecksum {
	tok, ok := meta[sentKey]
	delete(meta, sentKey)
	if !ok {
		return nil
	}
	v, _ := b.sent.Load(tok)
	sent, _ := v.(*sentChecksum)
	return sent
}

// PutObject writes input, of size bytes, to a file under tmp/, syncs it
// and commits it as bucket/key. gofakes3 has already hashed the body on
// its way in (its ETag, checked against Content-MD5 at the body's end);
// its hash is the object's, where input offers it, so the body is hashed
// once. The object keeps the checksum that the request sent, checked as
// the body came; a copy its source's, or one in the algorithm that the
// copy asked for, computed here. A body that ends short of size or fails
// is no object; a write that fails is S3's InternalError, naming the
// cause and not the path.
func (b *wholeBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	_, err := b.put(bucket, key, meta, input, size, cond)
	return gofakes3.PutObjectResult{}, err
}

// put is PutObject, which returns the object's hash (its ETag).
func (b *wholeBackend) put(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) ([]byte, error) {
	if err := checkObject(bucket, key); err != nil {
		return nil, err
	}
	if ok, err := b.BucketExists(bucket); err != nil {
		return nil, err
	} else if !ok {
		return nil, gofakes3.BucketNotFound(bucket)
	}
	f, err := os.CreateTemp(filepath.Join(b.root, tmpDir), "put-")
	if err != nil {
		return nil, objectNotKept(err)
	}
	sent := b.takeSent(meta)
	summed, ok := input.(interface{ Sum([]byte) []byte })
	var w io.Writer = f
	sum := md5.New()
	var copySum, ownSum hash.Hash
	if sent != nil && sent.copy {
		copySum = newChecksum(sent.algo)
	} else if ok && sent.checksum().algo == "" {
		// As S3 does since 2025, an object put with no checksum keeps a
		// CRC64NVME of its whole body, computed here, so that a GET
		// with checksum mode is checked all the same.
		ownSum = newChecksum(defaultChecksum)
	}
	switch {
	case !ok: // a copy's source, read from its file
		w = io.MultiWriter(f, sum)
		if copySum != nil {
			w = io.MultiWriter(f, sum, copySum)
		}
	case ownSum != nil:
		w = io.MultiWriter(f, ownSum)
	}
	body := &bodyReader{r: input}
	n, err := copyBuffered(w, body)
	switch {
	case err == nil:
	case body.err != nil && errors.Is(err, body.err):
		err = bodyError(err)
	default:
		err = objectNotKept(err)
	}
	if err == nil && n != size {
		err = gofakes3.ErrIncompleteBody
	}
	if err == nil {
		if err = f.Sync(); err != nil {
			err = objectNotKept(err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = objectNotKept(cerr)
	}
	var etag []byte
	if err == nil {
		etag = sum.Sum(nil)
		if ok {
			etag = summed.Sum(nil)
		}
		c := sent.checksum()
		switch {
		case copySum != nil && !ok:
			c = objectChecksum{algo: sent.algo, value: sumOf(copySum), typ: fullObject}
		case sent != nil && sent.copy:
			c = keptChecksum(meta) // the source's, which gofakes3 put in meta
		case ownSum != nil:
			c = objectChecksum{algo: defaultChecksum, value: sumOf(ownSum), typ: fullObject}
			if sent != nil { // for the answer, as S3 gives it
				sent.algo, sent.value = c.algo, c.value
			}
		}
		err = b.commit(bucket, key, meta, f.Name(), etag, partLayout{}, c, cond)
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	return etag, nil
}

// objectNotKept is the answer to an object that could not be written to
// the store's disk (notKept).
func objectNotKept(err error) error {
	return notKept("the object cannot be kept", err)
}

// commitFile puts the file tmp, a whole object written and synced under
// tmp/, in place as bucket/key with hash and the number of parts as its
// ETag, parts as its layout and sum as its checksum: a completed
// multipart upload.
func (b *wholeBackend) commitFile(bucket, key string, meta map[string]string, tmp string, hash []byte, parts partLayout, sum objectChecksum) error {
	return b.commit(bucket, key, meta, tmp, hash, parts, sum, nil)
}

// partsKey is the metadata that says of how many parts a completed
// multipart upload's object was made: its ETag is S3's "<hash>-<parts>",
// where gofakes3, which keeps a hash, not a string, would give
// "<hash>". gofakes3 answers every metadata entry as a header, as the
// answers of S3 to a GET or HEAD of one part give x-amz-mp-parts-count;
// etagWriter makes the ETag of it, and takes it away.
const partsKey = "X-Amz-Mp-Parts-Count"

// etag is an object's ETag, as S3 gives it, without its quotes.
func etag(hash []byte, meta map[string]string) string {
	if n := meta[partsKey]; n != "" {
		return hex.EncodeToString(hash) + "-" + n
	}
	return hex.EncodeToString(hash)
}

// commit puts the file tmp, a whole object written and synced under
// tmp/, in place as bucket/key, with hash as its ETag and meta as its
// metadata (what S3 keeps of it, keepMetadata: none of the old object's,
// which S3 replaces, where gofakes3 merged it), as the object of a multipart upload of those parts (their
// number in its ETag), or of none (a zero layout), with sum as its
// checksum (keepChecksum: none of the old object's, nor a client's
// header), if cond (nil for none) holds of the object there now; all
// under the store's lock. It keeps the backend's layout: the data at
// buckets/<bucket>/<key>, its metadata in a JSON file under
// metadata/<bucket>/ (s3afero.Metadata, at the name the backend gives
// it), written to tmp/, synced and renamed in place. On an error tmp is
// the caller's to remove.
//
// The directories that the renames wrote into, and those above each
// directory it made, are synced before it returns (outside the lock: a
// reader may see the object first), so that an object that the client
// was told of survives a crash; a sync that fails is InternalError, the
// object then in place, whole, but perhaps not after a crash.
func (b *wholeBackend) commit(bucket, key string, meta map[string]string, tmp string, hash []byte, parts partLayout, sum objectChecksum, cond *gofakes3.PutConditions) error {
	dirs, err := b.commitLocked(bucket, key, meta, tmp, hash, parts, sum, cond)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if err := b.syncDir(d); err != nil {
			return gofakes3.ErrorMessage(gofakes3.ErrInternal, "the object is in place, but the store's disk cannot make it durable: "+withoutPath(err).Error())
		}
	}
	return nil
}

// commitLocked is commit's work under the store's lock; it returns the
// directories to sync.
func (b *wholeBackend) commitLocked(bucket, key string, meta map[string]string, tmp string, hash []byte, parts partLayout, sum objectChecksum, cond *gofakes3.PutConditions) ([]string, error) {
	b.objects.Lock()
	defer b.objects.Unlock()
	if err := clash(filepath.Join(b.root, "buckets"), bucket, key); err != nil {
		return nil, err
	}
	old, err := b.headObjectLocked(bucket, key)
	switch {
	case err == nil:
	case gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey):
		old = nil
	default: // no bucket, or the store's failure
		return nil, err
	}
	// What S3 keeps of the request, none of the old object's metadata:
	// S3 replaces it.
	keepMetadata(meta)
	// Never the old object's checksum (it is not this body's, and a
	// client that checks a GET's checksum would refuse the read), nor
	// one that a client's header names unchecked.
	keepChecksum(meta, sum)
	// Never the old object's parts, nor a client's header: a PutObject
	// or CopyObject over a multipart object makes one of none.
	parts.keep(meta)
	if cond != nil {
		info := &gofakes3.ConditionalObjectInfo{Exists: old != nil}
		if old != nil {
			info.Hash = old.Hash
			if m := cond.IfMatch; m != nil && matchETag(*m, etag(old.Hash, old.Metadata)) {
				// The ETag that HeadObject gave, as a GET's If-Match
				// takes it: gofakes3 compares the hash alone.
				c, h := *cond, hex.EncodeToString(old.Hash)
				c.IfMatch = &h
				cond = &c
			}
		}
		if err := gofakes3.CheckPutConditions(cond, info); err != nil {
			return nil, err
		}
	}
	final := filepath.Join(b.root, "buckets", bucket, filepath.FromSlash(key))
	metaFile := filepath.Join(b.root, "metadata", bucket, metaName(key))
	var dirs []string
	for _, d := range []string{filepath.Dir(final), filepath.Dir(metaFile)} {
		made, err := mkdirAll(d)
		if err != nil {
			return nil, objectNotKept(err)
		}
		dirs = append(append(dirs, d), made...)
	}
	// The metadata is written first, beside the data under tmp/, as the
	// commit's intent: the data's rename into place is the commit, and a
	// crash before the metadata's rename follows it is rolled forward by
	// the next New (rollForward), so that no crash leaves the new data
	// with the old object's metadata. A rename keeps the file's size and
	// modification time, so the metadata can be made before it.
	st, err := os.Stat(tmp)
	if err != nil {
		return nil, objectNotKept(err)
	}
	js, err := json.Marshal(&s3afero.Metadata{File: path.Join(bucket, key), ModTime: st.ModTime(), Size: st.Size(), Hash: hash, Meta: meta})
	if err != nil {
		return nil, err
	}
	intent := tmp + intentSuffix
	if err := writeIntent(intent, js, b.syncDir); err != nil {
		os.Remove(intent)
		return nil, objectNotKept(err)
	}
	if b.crashAt != nil && b.crashAt("before the data's rename") {
		return nil, errCrashed
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(intent)
		return nil, objectNotKept(err)
	}
	if b.crashAt != nil && b.crashAt("before the metadata's rename") {
		return nil, errCrashed
	}
	if err := os.Rename(intent, metaFile); err != nil {
		// The data is in place: the metadata follows it at the next
		// start, whatever the client is told now.
		return nil, objectNotKept(err)
	}
	return dirs, nil
}

// intentSuffix names the metadata of a commit under way, beside its data
// under tmp/ (commitLocked, rollForward).
const intentSuffix = ".meta"

// errCrashed is what commitLocked returns where a test's crashAt stopped
// it, leaving the files as a crash there would.
var errCrashed = errors.New("s3: a crash played by a test")

// writeIntent writes a commit's metadata to the new file name under tmp/
// and makes it durable, entry included, before the data's rename may be:
// a crash must not keep the rename and lose the metadata.
func writeIntent(name string, b []byte, syncDir func(string) error) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(name))
	}
	return err
}

// rollForward finishes, at a start, the commits that a crash stopped
// between the data's rename and the metadata's: an intent under tmp/
// whose object's file is the one it describes (the same size and
// modification time: the data was renamed into place) is renamed to the
// object's metadata, and its directory synced. An intent whose data was
// not renamed describes no file in place, and is left to New's sweep of
// tmp/ with its data: the object stays the old one, whole.
func rollForward(root string) error {
	ents, err := os.ReadDir(filepath.Join(root, tmpDir))
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), intentSuffix) {
			continue
		}
		intent := filepath.Join(root, tmpDir, e.Name())
		b, err := os.ReadFile(intent)
		if err != nil {
			return err
		}
		var m s3afero.Metadata
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		bucket, key, ok := strings.Cut(m.File, "/")
		if !ok || checkObject(bucket, key) != nil {
			continue
		}
		st, err := os.Lstat(filepath.Join(root, "buckets", bucket, filepath.FromSlash(key)))
		if err != nil || !st.Mode().IsRegular() || st.Size() != m.Size || !st.ModTime().Equal(m.ModTime) {
			continue
		}
		metaFile := filepath.Join(root, "metadata", bucket, metaName(key))
		if err := os.MkdirAll(filepath.Dir(metaFile), 0o700); err != nil {
			return err
		}
		if err := os.Rename(intent, metaFile); err != nil {
			return err
		}
		if err := syncDirectory(filepath.Dir(metaFile)); err != nil {
			return err
		}
	}
	return nil
}

// mkdirAll makes dir and the directories above it that are missing, and
// returns the directories whose entries it changed: the parent of each
// directory it made.
func mkdirAll(dir string) ([]string, error) {
	var made []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || !errors.Is(err, os.ErrNotExist) || filepath.Dir(d) == d {
			break
		}
		made = append(made, filepath.Dir(d))
	}
	return made, os.MkdirAll(dir, 0o700)
}

// syncDirectory fsyncs the directory dir, so that the entries renamed or
// made in it survive a crash: a file's own fsync does not cover its name.
func syncDirectory(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// CreateBucket is the backend's, with the directory that holds the
// buckets synced after it, so that a bucket the client was told of
// survives a crash.
func (b *wholeBackend) CreateBucket(name string) error {
	if err := b.MultiBucketBackend.CreateBucket(name); err != nil {
		var coded gofakes3.Error
		if !errors.As(err, &coded) { // the disk's
			err = notKept("the bucket cannot be made", err)
		}
		return err
	}
	if err := b.syncDir(filepath.Join(b.root, "buckets")); err != nil {
		return gofakes3.ErrorMessage(gofakes3.ErrInternal, "the bucket is made, but the store's disk cannot make it durable: "+withoutPath(err).Error())
	}
	return nil
}

// CopyObject copies through this backend's GetObject and PutObject,
// which check the source and the destination, as gofakes3 does, and
// checks the copy's conditions on its source (copyConditions, which
// gofakes3 has in meta, and would keep as the copy's metadata) against
// the source it opened: PreconditionFailed, and nothing written, where
// one fails. The copy's metadata is the source's or the request's, as
// x-amz-metadata-directive says (copyMetadata), where gofakes3 merged
// them.
func (b *wholeBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	if err := checkRead(srcBucket, srcKey); err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	if err := checkObject(dstBucket, dstKey); err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	cond := copyConditions(func(k string) string { return meta[k] })
	for _, k := range []string{copyIfMatch, copyIfNoneMatch, copyIfModifiedSince, copyIfUnmodifiedSince} {
		delete(meta, k)
	}
	src, err := b.GetObject(srcBucket, srcKey, nil)
	if err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	defer src.Contents.Close()
	if cond != nil && cond.check(`"`+etag(src.Hash, src.Metadata)+`"`, src.Metadata["Last-Modified"]) != 0 {
		return gofakes3.CopyObjectResult{}, gofakes3.ErrorMessage(gofakes3.ErrPreconditionFailed, "At least one of the pre-conditions you specified did not hold: the copy's source is not the object that its x-amz-copy-source-if-* headers name")
	}
	copyMetadata(meta, src.Metadata)
	hash, err := b.put(dstBucket, dstKey, meta, src.Contents, src.Size, nil)
	if err != nil {
		return gofakes3.CopyObjectResult{}, err
	}
	// The copy's own ETag, an object of one part: gofakes3 answered the
	// source's hash, which is not the copy's where the source is of parts.
	return gofakes3.CopyObjectResult{ETag: `"` + hex.EncodeToString(hash) + `"`, LastModified: gofakes3.NewContentTime(time.Now())}, nil
}

// GetObject is the backend's, not amid a commit. The object's file is
// open when it returns: a commit after it replaces the name, not the data
// being read. A key under another object's file ("a/b" where "a" is an
// object), or that is the directory of others, is no object.
func (b *wholeBackend) GetObject(bucket, key string, rng *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	if err := checkRead(bucket, key); err != nil {
		return nil, err
	}
	b.objects.RLock()
	defer b.objects.RUnlock()
	if st, err := b.objectFile(bucket, key); err != nil {
		return nil, err
	} else if _, err := b.freshMeta(bucket, key, st); err != nil {
		return nil, err
	}
	obj, err := b.MultiBucketBackend.GetObject(bucket, key, rng)
	if err == nil {
		keepMetadata(obj.Metadata) // an object written before the store kept only that
	}
	return obj, err
}

// HeadObject is the backend's, not amid a commit, as GetObject.
func (b *wholeBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	if err := checkRead(bucket, key); err != nil {
		return nil, err
	}
	b.objects.RLock()
	defer b.objects.RUnlock()
	obj, err := b.headObjectLocked(bucket, key)
	if err == nil {
		keepMetadata(obj.Metadata)
	}
	return obj, err
}

// headObjectLocked is HeadObject with b.objects held.
func (b *wholeBackend) headObjectLocked(bucket, key string) (*gofakes3.Object, error) {
	if st, err := b.objectFile(bucket, key); err != nil {
		return nil, err
	} else if _, err := b.freshMeta(bucket, key, st); err != nil {
		return nil, err
	}
	return b.MultiBucketBackend.HeadObject(bucket, key)
}

// objectFile says whether bucket/key is an object: a regular file, each
// directory above it in the bucket a directory, not a link; NoSuchBucket
// or NoSuchKey if not. So a read does not follow a link out of the
// bucket, nor block on a FIFO (the backend opens the file under its
// lock, and every request waits for it), nor take a directory (the
// prefix of other keys) or a path under another object's file for an
// object. The store's lock is held.
func (b *wholeBackend) objectFile(bucket, key string) (fs.FileInfo, error) {
	dir := filepath.Join(b.root, "buckets", bucket)
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		return nil, gofakes3.BucketNotFound(bucket)
	}
	st, err := lstatUnder(dir, key)
	if err != nil || !st.Mode().IsRegular() {
		return nil, gofakes3.KeyNotFound(key)
	}
	return st, nil
}

// noSuchKey reports whether objectFile found no object.
func noSuchKey(_ fs.FileInfo, err error) bool {
	return gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey)
}

// ListBucket lists as S3 does (listLocked), not amid a commit
// (ListObjectsV2 and ListObjects list through here). A prefix that no key
// of this store can have lists nothing.
func (b *wholeBackend) ListBucket(bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	if checkBucket(bucket) != nil {
		return nil, gofakes3.BucketNotFound(bucket)
	}
	b.objects.RLock()
	defer b.objects.RUnlock()
	if prefix == nil {
		prefix = &gofakes3.Prefix{}
	}
	return b.listLocked(bucket, *prefix, page)
}

// DeleteObject is the backend's, not amid a commit. A key that no
// object of this store can have, or that is the directory of other keys,
// has nothing to delete: S3 answers such a delete with success.
func (b *wholeBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	if err := checkRead(bucket, key); err != nil {
		if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
			return gofakes3.ObjectDeleteResult{}, nil
		}
		return gofakes3.ObjectDeleteResult{}, err
	}
	b.objects.Lock()
	defer b.objects.Unlock()
	if _, err := b.objectFile(bucket, key); gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchKey) {
		return gofakes3.ObjectDeleteResult{}, nil // nothing to delete
	}
	r, err := b.MultiBucketBackend.DeleteObject(bucket, key)
	if err == nil {
		b.pruneEmpty(bucket, key)
	}
	return r, err
}

// DeleteMulti is the backend's, not amid a commit, for the keys that this
// store can hold; each other key is refused on its own (InvalidArgument)
// or, where no object can have it, deleted as S3 deletes a key it does not
// have, and so is a directory of other keys.
func (b *wholeBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	var res gofakes3.MultiDeleteResult
	if checkBucket(bucket) != nil {
		return res, gofakes3.BucketNotFound(bucket)
	}
	b.objects.Lock()
	defer b.objects.Unlock()
	held := make([]string, 0, len(keys))
	for _, k := range keys {
		switch f := checkKey(k); {
		case f != nil && !f.unheld:
			res.Error = append(res.Error, gofakes3.ErrorResult{Key: k, Code: f.code, Message: f.msg})
		case f != nil || noSuchKey(b.objectFile(bucket, k)):
			res.Deleted = append(res.Deleted, gofakes3.ObjectID{Key: k})
		default:
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		if ok, err := b.BucketExists(bucket); err != nil {
			return res, err
		} else if !ok {
			return res, gofakes3.BucketNotFound(bucket)
		}
		return res, nil
	}
	r, err := b.MultiBucketBackend.DeleteMulti(bucket, held...)
	if err != nil {
		return res, err
	}
	for _, d := range r.Deleted {
		b.pruneEmpty(bucket, d.Key)
	}
	res.Deleted = append(res.Deleted, r.Deleted...)
	res.Error = append(res.Error, r.Error...)
	return res, nil
}

// DeleteBucket is the backend's, not amid a commit, which would make the
// bucket's directory again.
func (b *wholeBackend) DeleteBucket(bucket string) error {
	return b.bucketLocked(bucket, func(bucket string) error {
		dropEmptyDirs(filepath.Join(b.root, "buckets", bucket)) // no objects: the bucket is empty
		return b.MultiBucketBackend.DeleteBucket(bucket)
	})
}

// ForceDeleteBucket is the backend's, not amid a commit.
func (b *wholeBackend) ForceDeleteBucket(bucket string) error {
	return b.bucketLocked(bucket, b.MultiBucketBackend.ForceDeleteBucket)
}

// bucketLocked calls f on bucket, a name S3's rules allow, with the
// store's lock held.
func (b *wholeBackend) bucketLocked(bucket string, f func(string) error) error {
	if checkBucket(bucket) != nil {
		return gofakes3.BucketNotFound(bucket)
	}
	b.objects.Lock()
	defer b.objects.Unlock()
	return f(bucket)
}

// etagWriter gives the answer to a GET or HEAD of a completed multipart
// upload's object S3's ETag, "<hash>-<parts>" (see partsKey), and
// answers the request's conditions (cond, nil for none) against it: an
// answer of the object whose conditions do not hold becomes a 304 or S3's
// PreconditionFailed, and its body is thrown away unread. It gives the
// object's checksum (keptChecksum) with a whole object (200) where the
// request asked for it (checksums: wantsChecksum), and never otherwise:
// gofakes3 answers every metadata entry as a header. The store's own
// entries (ownPrefix) it never gives. The answer to a read of one part
// of a multipart object (part; see Server.partNumber) is that part's:
// 206, the parts count, and the part's own checksum where it has one.
type etagWriter struct {
	http.ResponseWriter
	cond      *readConditions
	checksums bool
	part      *partRead
	wrote     bool
	replaced  bool
}

// wantsChecksum reports whether a GET or HEAD asks for the object's
// checksum (x-amz-checksum-mode: ENABLED), or its part's: S3 gives none
// with a range, which is not what a checksum is of.
func wantsChecksum(r *http.Request) bool {
	return strings.EqualFold(r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED") && r.Header.Get("Range") == ""
}

// answerChecksum takes the checksum headers out of h, and returns the
// object's checksum that they held.
func answerChecksum(h http.Header) objectChecksum {
	m := map[string]string{}
	for k, v := range h {
		if strings.HasPrefix(strings.ToLower(k), checksumPrefix) {
			m[http.CanonicalHeaderKey(k)] = v[0]
			delete(h, k)
		}
	}
	return keptChecksum(m)
}

// takeOwn takes the store's own entries (ownPrefix) out of h, and
// returns the part sizes' entry.
func takeOwn(h http.Header) string {
	sizes := h.Get(partSizesKey)
	for k := range h {
		if strings.HasPrefix(k, ownPrefix) {
			delete(h, k)
		}
	}
	return sizes
}

func (w *etagWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.Header()
	sizes := takeOwn(h)
	lowerUserMetadata(h)
	ok := status == http.StatusOK || status == http.StatusPartialContent
	kept, give := answerChecksum(h), objectChecksum{}
	if w.checksums && status == http.StatusOK && w.part == nil {
		give = kept
	}
	if w.part != nil && ok {
		if h.Get("ETag") != w.part.etag || sizes != w.part.sizes {
			// Another object was put over the one whose part was
			// looked up, before the read: the range read is no part
			// of it. The SDKs retry SlowDown.
			w.replaced = true
			for k := range h {
				delete(h, k)
			}
			writeError(w.ResponseWriter, http.StatusServiceUnavailable, "SlowDown", "The object changed while its part was read; please try again")
			return
		}
		if w.checksums && w.part.sum != "" {
			give = objectChecksum{algo: kept.algo, value: w.part.sum, typ: composite}
		}
	}
	if give.algo != "" {
		h.Set(checksumKey(give.algo), give.value)
		h.Set(checksumTypeKey, give.typ)
	}
	if n := h.Get(partsKey); n != "" {
		h.Del(partsKey)
		if e := h.Get("ETag"); strings.HasSuffix(e, `"`) {
			h.Set("ETag", strings.TrimSuffix(e, `"`)+"-"+n+`"`)
		}
	}
	if w.part != nil && ok {
		h.Set(partsKey, strconv.Itoa(w.part.count))
	}
	if w.cond == nil || !ok || h.Get("ETag") == "" {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	switch w.cond.check(h.Get("ETag"), h.Get("Last-Modified")) {
	case http.StatusPreconditionFailed:
		w.replaced = true
		for k := range h {
			delete(h, k)
		}
		writeError(w.ResponseWriter, http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
	case http.StatusNotModified:
		w.replaced = true
		for _, k := range []string{"Content-Length", "Content-Range", "Content-Type", "Accept-Ranges"} {
			h.Del(k)
		}
		w.ResponseWriter.WriteHeader(http.StatusNotModified)
	default:
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *etagWriter) Write(p []byte) (int, error) {
	w.done()
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// done writes the answer's header if the handler wrote none yet: before
// its body, and at its end (the server would write its 200 for a HEAD
// past this writer).
func (w *etagWriter) done() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
}

// ReadFrom keeps the server's own (sendfile(2) from an object's file).
func (w *etagWriter) ReadFrom(r io.Reader) (int64, error) {
	w.done()
	if w.replaced {
		return 0, nil
	}
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(w.ResponseWriter, r)
}

// Unwrap lets http.ResponseController reach the server's own writer.
func (w *etagWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// metaName is the name of an object's metadata file in s3afero's layout
// (its metaStore.metaPath): the key with its slashes as underscores, and
// the FNV-128a hash of the key.
func metaName(key string) string {
	h := fnv.New128a()
	h.Write([]byte(key))
	return strings.NewReplacer("/", "_", "\\", "_").Replace(key) + "-" + hex.EncodeToString(h.Sum(nil))
}

// atomicFs writes every file that the backend creates (the metadata it
// writes again when it finds a file's out of date) to tmp/ first, syncs
// it and renames it into place when it is closed, so that no reader and
// no crash finds it half-written.
type atomicFs struct {
	afero.Fs
}

func (a *atomicFs) Create(name string) (afero.File, error) {
	return a.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (a *atomicFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != os.O_CREATE|os.O_TRUNC || flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return a.Fs.OpenFile(name, flag, perm)
	}
	f, err := afero.TempFile(a.Fs, tmpDir, "put-")
	if err != nil {
		return nil, err
	}
	return &atomicFile{File: f, fs: a.Fs, final: name}, nil
}

// atomicFile is a file being written under a temporary name.
type atomicFile struct {
	afero.File
	fs     afero.Fs
	final  string
	closed bool
}

func (f *atomicFile) Name() string { return f.final }

func (f *atomicFile) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	tmp := f.File.Name()
	err := f.File.Sync()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = f.fs.Rename(tmp, f.final)
	}
	if err != nil {
		f.fs.Remove(tmp)
	}
	return err
}
