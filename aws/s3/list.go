package s3

import (
	"crypto/md5"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
)

// Listing, as S3 lists. gofakes3's file backend listed a prefix with a
// '/' delimiter by reading the prefix's directory: a prefix of no
// directory was NoSuchBucket, one under an object's file a 500, and a
// prefix that ended inside a name ("d") gave the common prefix "d/d/";
// any other delimiter was ignored. Here the keys under the prefix's
// directory are walked, and each is a content or, where the delimiter
// follows the prefix in it, a common prefix: the key up to and with that
// delimiter.

// listLocked lists bucket's keys that begin with p's prefix, cut at its
// delimiter, sorted as S3 sorts them (by their bytes), one page of them:
// the keys and common prefixes after page's marker (a V1 marker, a V2
// start-after, or the key or common prefix that gofakes3 hides in a V2
// continuation token), at most page.MaxKeys of them (gofakes3 gives
// 1000 where the request names none), with IsTruncated and NextMarker,
// the page's last entry, where more follow. A max-keys of 0 lists
// nothing, and is not truncated, as on S3. A common
// prefix is after the marker where it sorts after it, as a key does: a
// page that ended with a common prefix is not followed by the same one.
// The store's lock is read-held.
func (b *wholeBackend) listLocked(bucket string, p gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	root := filepath.Join(b.root, "buckets", bucket)
	if st, err := os.Stat(root); errors.Is(err, os.ErrNotExist) || (err == nil && !st.IsDir()) {
		return nil, gofakes3.BucketNotFound(bucket)
	} else if err != nil {
		return nil, notKept("the bucket cannot be listed", err)
	}
	var prefix, delim string
	if p.HasPrefix {
		prefix = p.Prefix
	}
	if p.HasDelimiter {
		delim = p.Delimiter
	}
	after := ""
	if page.HasMarker {
		after = page.Marker
	}
	l := gofakes3.NewObjectList()
	if !prefixHeld(prefix) || page.MaxKeys == 0 {
		return l, nil
	}
	type file struct {
		key string
		d   fs.DirEntry
	}
	var files []file
	// Only the directory that the prefix names up to its last '/' can
	// hold its keys.
	start := root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		start = filepath.Join(root, filepath.FromSlash(prefix[:i]))
		if st, err := lstatUnder(root, prefix[:i]); err != nil || !st.IsDir() {
			return l, nil // no directory, or a link: no key has the prefix
		}
	}
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == start && (errors.Is(err, os.ErrNotExist) || errors.Is(err, fs.ErrInvalid) || notADirectory(err)) {
				return filepath.SkipAll // no key has the prefix
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if path == root {
				return nil
			}
			dirKey := key + "/"
			if !strings.HasPrefix(dirKey, prefix) && !strings.HasPrefix(prefix, dirKey) {
				return filepath.SkipDir // none of its keys has the prefix
			}
			if dirKey < after && !strings.HasPrefix(after, dirKey) {
				return filepath.SkipDir // its keys all sort before the marker
			}
			if delim == "/" && len(dirKey) > len(prefix) && strings.HasPrefix(dirKey, prefix) {
				// All its keys share one common prefix: the directory's.
				if holdsFile(path) {
					rest := dirKey[len(prefix):]
					l.AddPrefix(prefix + rest[:strings.Index(rest, "/")+1])
				}
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasPrefix(key, prefix) {
			return nil
		}
		if delim != "" {
			if i := strings.Index(key[len(prefix):], delim); i >= 0 {
				l.AddPrefix(key[:len(prefix)+i+len(delim)])
				return nil
			}
		}
		if key > after {
			files = append(files, file{key, d})
		}
		return nil
	})
	if err != nil {
		return nil, notKept("the bucket cannot be listed", err)
	}
	// The page: keys and common prefixes after the marker, merged in S3's
	// order, up to MaxKeys; only its keys' metadata is read.
	sort.Slice(files, func(i, j int) bool { return files[i].key < files[j].key })
	var prefixes []string
	for _, cp := range l.CommonPrefixes {
		if cp.Prefix > after {
			prefixes = append(prefixes, cp.Prefix)
		}
	}
	sort.Strings(prefixes)
	out := gofakes3.NewObjectList()
	for n := int64(0); len(files) > 0 || len(prefixes) > 0; n++ {
		if n == page.MaxKeys {
			out.IsTruncated = true
			break
		}
		if len(prefixes) == 0 || (len(files) > 0 && files[0].key < prefixes[0]) {
			info, err := files[0].d.Info()
			if err != nil {
				return nil, notKept("the bucket cannot be listed", err)
			}
			c, err := b.listed(bucket, files[0].key, info)
			if err != nil {
				return nil, notKept("the bucket cannot be listed", err)
			}
			out.Add(c)
			out.NextMarker, files = files[0].key, files[1:]
		} else {
			out.AddPrefix(prefixes[0])
			out.NextMarker, prefixes = prefixes[0], prefixes[1:]
		}
	}
	if !out.IsTruncated {
		out.NextMarker = ""
	}
	return out, nil
}

// listed is the listing's entry of bucket/key, whose file is info, its
// ETag from its metadata (freshMeta). A completed multipart upload's ETag is
// S3's "<hash>-<parts>", as GetObject and HeadObject give it.
func (b *wholeBackend) listed(bucket, key string, info fs.FileInfo) (*gofakes3.Content, error) {
	m, err := b.freshMeta(bucket, key, info)
	if err != nil {
		return nil, err
	}
	tag := gofakes3.FormatETag(m.Hash)
	if n, err := strconv.Atoi(m.Meta[partsKey]); err == nil && n >= 1 {
		tag = strings.TrimSuffix(tag, `"`) + "-" + m.Meta[partsKey] + `"`
	}
	return &gofakes3.Content{Key: key, LastModified: gofakes3.NewContentTime(info.ModTime()), ETag: tag, Size: info.Size()}, nil
}

// freshMeta is bucket/key's metadata, whose data file is st, made to
// describe that file again where it does not: gofakes3's backend would
// hash the metadata file, not the data, and keep that as the ETag. Where
// only the modification time is another (a data directory copied
// without the files' times, a byte changed in place), the metadata is
// kept, with the new time: the ETag stays the object's as it was put,
// and the checksum it kept goes on telling a changed byte. Where the size
// is another too, or there is no metadata (a file put by hand), the data
// is hashed for the ETag, and the parts and their checksums, which are no
// longer the data's, are dropped; a whole object's checksum is kept, and
// tells a client that checks it that the object is not the one put. The
// store's lock is held, at least for reading: readers that make the same
// file again write the same bytes.
func (b *wholeBackend) freshMeta(bucket, key string, st fs.FileInfo) (s3afero.Metadata, error) {
	name := filepath.Join(b.root, "metadata", bucket, metaName(key))
	var m s3afero.Metadata
	js, err := os.ReadFile(name)
	kept := err == nil && json.Unmarshal(js, &m) == nil && len(m.Hash) > 0
	if kept && m.Size == st.Size() && m.ModTime.Equal(st.ModTime()) {
		return m, nil
	}
	if !kept || m.Size != st.Size() {
		// The file that the caller found regular: not a link or a FIFO
		// put in its place since.
		f, err := os.OpenFile(filepath.Join(b.root, "buckets", bucket, filepath.FromSlash(key)), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
		if err != nil {
			return m, notKept("the object cannot be read", err)
		}
		h := md5.New()
		_, err = copyBuffered(h, f)
		f.Close()
		if err != nil {
			return m, notKept("the object cannot be read", err)
		}
		if m.Meta == nil {
			m.Meta = map[string]string{}
		}
		if m.Meta[partsKey] != "" {
			keepChecksum(m.Meta, objectChecksum{}) // the parts'
		}
		partLayout{}.keep(m.Meta)
		m.Hash = h.Sum(nil)
	}
	m.File, m.Size, m.ModTime = path.Join(bucket, key), st.Size(), st.ModTime()
	if js, err = json.Marshal(&m); err != nil {
		return m, err
	}
	rel := filepath.Join("metadata", bucket, metaName(key))
	if err := b.fs.MkdirAll(filepath.Dir(rel), 0o700); err != nil {
		return m, notKept("the object's metadata cannot be kept", err)
	}
	f, err := b.fs.Create(rel) // written under tmp/, synced and renamed into place (atomicFs)
	if err == nil {
		_, err = f.Write(js)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return m, notKept("the object's metadata cannot be kept", err)
	}
	return m, nil
}

// holdsFile reports whether the directory dir holds a file at any depth:
// one whose files were all deleted holds none, and is no prefix of any
// key. It reads a few entries at a time, and stops at the first file. A
// directory it cannot read holds one, as far as it knows: it is not
// taken for empty, and removed.
func holdsFile(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return true
	}
	defer f.Close()
	for {
		ents, err := f.ReadDir(16)
		for _, e := range ents {
			if !e.IsDir() || holdsFile(filepath.Join(dir, e.Name())) {
				return true
			}
		}
		if errors.Is(err, io.EOF) {
			return false
		} else if err != nil {
			return true
		}
	}
}

// lstatUnder is os.Lstat of the path rel ('/'-separated) under dir, each
// directory on the way a directory, not a link (the kernel would follow
// one out of dir).
func lstatUnder(dir, rel string) (fs.FileInfo, error) {
	segs := strings.Split(rel, "/")
	for i, s := range segs {
		dir = filepath.Join(dir, s)
		st, err := os.Lstat(dir)
		if err != nil {
			return nil, err
		}
		if i < len(segs)-1 && !st.IsDir() {
			return nil, fs.ErrNotExist
		}
		if i == len(segs)-1 {
			return st, nil
		}
	}
	return nil, fs.ErrNotExist
}

// pruneEmpty removes the directories from key's down to the bucket's
// that its deletion left empty, so that they are no prefix of any key (a
// listing's common prefix, a write of their name refused as a
// directory). The store's lock is held.
func (b *wholeBackend) pruneEmpty(bucket, key string) {
	root := filepath.Join(b.root, "buckets", bucket)
	for dir := filepath.Dir(filepath.Join(root, filepath.FromSlash(key))); dir != root && strings.HasPrefix(dir, root+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil { // not empty, or gone
			return
		}
	}
}

// dropEmptyDirs removes the directories under the directory dir that hold
// no file: what deletions before pruneEmpty left.
func dropEmptyDirs(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if p := filepath.Join(dir, e.Name()); e.IsDir() && !holdsFile(p) {
			os.RemoveAll(p)
		}
	}
}
