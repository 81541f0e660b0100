package s3

import (
	"bytes"
	"crypto/md5"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"

	"qshare/aws/wire"
)

// Multipart uploads. gofakes3's own uploader kept every part in memory
// until the upload completed, and then joined them into one more copy; it
// read a part's whole body before it looked the upload up. This one, which
// gofakes3 uses in its place (gofakes3.MultipartBackend), keeps each part
// in a file of its own under tmp/parts/<upload id>/, answers NoSuchUpload
// before it reads a byte of a part whose upload does not exist, lists
// each part's real size, ETag and time, and aborts the uploads that no
// part has come to for a while (Server.AbortIdleUploads). The protocol
// (the XML, the routing) stays gofakes3's.
//
// An upload lives in memory and in its directory: a restart forgets it
// (tmp/ is emptied at start), as S3 never does; the client then starts
// again (TestKillServerDuringUpload in test/processe2e).

// partsDir is where parts are kept, under tmp/.
const partsDir = "parts"

// uploads is the store's multipart uploads. It is safe for concurrent
// use.
type uploads struct {
	dir string // tmp/parts
	tmp string // tmp/, where a completed upload's object is joined
	// commit puts a completed upload's object, the file tmp, in place
	// under bucket/key, with hash, the MD5 of its parts' MD5s, and the
	// number of its parts as its ETag, parts as its layout, and sum as
	// its checksum.
	commit func(bucket, key string, meta map[string]string, tmp string, hash []byte, parts partLayout, sum objectChecksum) error
	now    func() time.Time

	mu   sync.Mutex
	byID map[gofakes3.UploadID]*upload
}

// upload is one multipart upload in progress.
type upload struct {
	id          gofakes3.UploadID
	bucket, key string
	meta        map[string]string
	// sum is the algorithm and type of the checksum that the upload
	// keeps of its parts and its object (none: no algo).
	sum       objectChecksum
	initiated time.Time
	// touched is when a part last came or was being received; receiving
	// counts the parts being received now: an upload that receives is
	// never idle.
	touched   time.Time
	receiving int
	parts     map[int]*part
}

// part is one part of an upload, kept in file.
type part struct {
	file     string
	size     int64
	md5      []byte
	modified time.Time
	// sum is the part's checksum: the one it sent, or one in the
	// upload's algorithm computed as it came.
	sum objectChecksum
	// dflt is the part's CRC64NVME (raw), computed as it came, in an
	// upload created without an algorithm: the object's default
	// checksum is combined from them.
	dflt []byte
}

func (p *part) etag() string { return `"` + hex.EncodeToString(p.md5) + `"` }

func newUploads(dir, tmp string, commit func(bucket, key string, meta map[string]string, tmp string, hash []byte, parts partLayout, sum objectChecksum) error) *uploads {
	return &uploads{dir: dir, tmp: tmp, commit: commit, now: time.Now, byID: map[gofakes3.UploadID]*upload{}}
}

var _ gofakes3.MultipartBackend = (*uploads)(nil)

// CreateMultipartUpload starts an upload of bucket/key (gofakes3 checked
// that the bucket exists) under a new, random ID of decimal digits; one
// whose x-amz-checksum-algorithm (in meta, which the store checked:
// uploadChecksum) names one keeps its parts' checksums in it.
func (s *uploads) CreateMultipartUpload(bucket, key string, meta map[string]string) (gofakes3.UploadID, error) {
	if err := checkObject(bucket, key); err != nil {
		return "", err
	}
	sum, e := uploadChecksum(meta[checksumKey("algorithm")], meta[checksumTypeKey])
	if e != nil {
		return "", gofakes3.ErrorMessage(gofakes3.ErrInvalidArgument, e.Message)
	}
	keepChecksum(meta, objectChecksum{})
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var id gofakes3.UploadID
	for id == "" || s.byID[id] != nil {
		var b [8]byte
		rand.Read(b[:])
		id = gofakes3.UploadID(strconv.FormatUint(binary.BigEndian.Uint64(b[:]), 10))
	}
	if err := os.MkdirAll(filepath.Join(s.dir, string(id)), 0o700); err != nil {
		return "", partNotKept(err)
	}
	s.byID[id] = &upload{id: id, bucket: bucket, key: key, meta: meta, sum: sum, initiated: now, touched: now, parts: map[int]*part{}}
	return id, nil
}

// get returns the upload id of bucket/key, or NoSuchUpload; s.mu is held.
func (s *uploads) get(bucket, key string, id gofakes3.UploadID) (*upload, error) {
	u := s.byID[id]
	if u == nil || u.bucket != bucket || u.key != key {
		return nil, gofakes3.ErrNoSuchUpload
	}
	return u, nil
}

// algorithm is the checksum algorithm of the upload id ("" for none, or
// for no such upload).
func (s *uploads) algorithm(id gofakes3.UploadID) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := s.byID[id]; u != nil {
		return u.sum.algo
	}
	return ""
}

// UploadPart keeps a part's body in a file of the upload's directory. An
// upload that does not exist, or is of another bucket or key, is
// NoSuchUpload before the body is read; a body that ends before its
// length, or fails, leaves no file. The part keeps the checksum that its
// request sent (its body, a *failedBody, has it; checked as it was read),
// or one in the upload's algorithm, computed here; and a Content-MD5 that
// the request sent is checked against the part's MD5 (BadDigest).
func (s *uploads) UploadPart(bucket, key string, id gofakes3.UploadID, number int, length int64, input io.Reader) (string, error) {
	var sent *sentChecksum
	if fb, ok := input.(*failedBody); ok {
		sent = fb.sent
	}
	p, err := s.uploadPart(bucket, key, id, number, length, input, sent)
	if err != nil {
		return "", err
	}
	return p.etag(), nil
}

// uploadPart keeps the part number of upload id, length bytes read from
// input, as UploadPart does, with the checksum that sent names (nil: the
// upload's, computed as it comes), and returns it.
func (s *uploads) uploadPart(bucket, key string, id gofakes3.UploadID, number int, length int64, input io.Reader, sent *sentChecksum) (*part, error) {
	if number < 1 || number > gofakes3.MaxUploadPartNumber {
		return nil, gofakes3.ErrInvalidPart
	}
	s.mu.Lock()
	u, err := s.get(bucket, key, id)
	if err == nil {
		u.receiving++
		u.touched = s.now()
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	defer func() {
		s.mu.Lock()
		u.receiving--
		u.touched = s.now()
		s.mu.Unlock()
	}()
	f, err := os.CreateTemp(filepath.Join(s.dir, string(id)), "part-")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) { // aborted meanwhile
			return nil, gofakes3.ErrNoSuchUpload
		}
		return nil, partNotKept(err)
	}
	sum := md5.New()
	writers := []io.Writer{f, sum}
	own := hash.Hash(nil) // the upload's checksum where the part sends none
	if sent.checksum().algo == "" {
		if own = newChecksum(u.sum.algo); own != nil {
			writers = append(writers, own)
		}
	}
	dflt := hash.Hash(nil) // the default checksum's share, in an upload with no algorithm
	if u.sum.algo == "" {
		dflt = newChecksum(defaultChecksum)
		writers = append(writers, dflt)
	}
	body := &bodyReader{r: input}
	n, err := copyBuffered(io.MultiWriter(writers...), body)
	switch {
	case err == nil:
	case body.err != nil && errors.Is(err, body.err):
		err = bodyError(err)
	default: // the write of the part's file
		err = partNotKept(err)
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = partNotKept(cerr)
	}
	if err == nil && n != length {
		err = gofakes3.ErrIncompleteBody
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, err
	}
	p := &part{file: f.Name(), size: n, md5: sum.Sum(nil), modified: s.now(), sum: sent.checksum()}
	if dflt != nil {
		p.dflt = dflt.Sum(nil)
	}
	if own != nil {
		p.sum = objectChecksum{algo: u.sum.algo, value: sumOf(own), typ: fullObject}
		if sent != nil { // for the answer, as S3 gives it
			sent.algo, sent.value = p.sum.algo, p.sum.value
		}
	}
	if sent != nil && sent.md5 != nil && !bytes.Equal(sent.md5, p.md5) {
		os.Remove(p.file)
		return nil, gofakes3.ErrBadDigest
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID[id] != u { // completed or aborted while the body came
		os.Remove(p.file)
		return nil, gofakes3.ErrNoSuchUpload
	}
	if old := u.parts[number]; old != nil {
		os.Remove(old.file)
	}
	u.parts[number] = p
	return p, nil
}

// bodyReader reads a part's body and keeps the error of a read that
// failed, so that UploadPart tells the client's fault (a body cut short,
// or refused by a check of the body) from the store's (a write that
// failed).
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// bodyError is the answer to a part whose body could not be read to its
// end: S3's own error where a check of the body gave one (BadDigest,
// XAmzContentSHA256Mismatch, IncompleteBody of a framing), else the
// client's connection ended or broke before its Content-Length:
// IncompleteBody, never the store's InternalError.
func bodyError(err error) error {
	var coded gofakes3.Error
	var wired *wire.Error
	if errors.As(err, &coded) || errors.As(err, &wired) {
		return err
	}
	return gofakes3.ErrorMessage(gofakes3.ErrIncompleteBody, "the part's body ended before its Content-Length: "+err.Error())
}

// copyBuffered copies src to dst through a buffer of 1 MiB: io.Copy's 32
// KiB would cost a write (and a hash call) per 32 KiB of a part.
func copyBuffered(dst io.Writer, src io.Reader) (int64, error) {
	b := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(b)
	return io.CopyBuffer(dst, onlyReader{src}, *b)
}

// onlyReader hides a reader's WriterTo, so that io.CopyBuffer uses the
// buffer it is given.
type onlyReader struct{ io.Reader }

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// ListParts lists the parts of an upload by number, from the one after
// marker, at most limit of them: each with its data's size, its ETag (the
// MD5 of its data) and when it came.
func (s *uploads) ListParts(bucket, key string, id gofakes3.UploadID, marker int, limit int64) (*gofakes3.ListMultipartUploadPartsResult, error) {
	res, _, _, err := s.listParts(bucket, key, id, marker, limit)
	return res, err
}

// listParts is ListParts, with each listed part's checksum and the
// upload's algorithm and type.
func (s *uploads) listParts(bucket, key string, id gofakes3.UploadID, marker int, limit int64) (*gofakes3.ListMultipartUploadPartsResult, []objectChecksum, objectChecksum, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.get(bucket, key, id)
	if err != nil {
		return nil, nil, objectChecksum{}, err
	}
	var sums []objectChecksum
	numbers := make([]int, 0, len(u.parts))
	for n := range u.parts {
		if n > marker {
			numbers = append(numbers, n)
		}
	}
	sort.Ints(numbers)
	res := &gofakes3.ListMultipartUploadPartsResult{Bucket: bucket, Key: key, UploadID: id, MaxParts: limit, PartNumberMarker: marker}
	for i, n := range numbers {
		if int64(i) >= limit {
			res.IsTruncated = true
			break
		}
		p := u.parts[n]
		res.Parts = append(res.Parts, gofakes3.ListMultipartUploadPartItem{PartNumber: n, LastModified: gofakes3.NewContentTime(p.modified), ETag: p.etag(), Size: p.size})
		sums = append(sums, p.sum)
		res.NextPartNumberMarker = n
	}
	return res, sums, u.sum, nil
}

// ListMultipartUploads lists a bucket's uploads in progress, by key and
// then by when each began, from the one after marker.
func (s *uploads) ListMultipartUploads(bucket string, marker *gofakes3.UploadListMarker, prefix gofakes3.Prefix, limit int64) (*gofakes3.ListMultipartUploadsResult, error) {
	s.mu.Lock()
	var all []*upload
	for _, u := range s.byID {
		if u.bucket == bucket {
			all = append(all, u)
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.key != b.key {
			return a.key < b.key
		}
		if !a.initiated.Equal(b.initiated) {
			return a.initiated.Before(b.initiated)
		}
		return a.id < b.id
	})
	res := &gofakes3.ListMultipartUploadsResult{Bucket: bucket, Delimiter: prefix.Delimiter, Prefix: prefix.Prefix, MaxUploads: limit}
	if marker != nil {
		res.KeyMarker, res.UploadIDMarker = marker.Object, marker.UploadID
		start := sort.Search(len(all), func(i int) bool { return all[i].key > marker.Object })
		if marker.UploadID != "" {
			// The uploads of the marker's key after the marker's upload.
			for i, u := range all {
				if u.key == marker.Object && u.id == marker.UploadID {
					start = i + 1
					break
				}
			}
		}
		all = all[start:]
	}
	seen := map[string]bool{}
	var m gofakes3.PrefixMatch
	var count int64
	for _, u := range all {
		if !prefix.Match(u.key, &m) {
			continue
		}
		if count >= limit {
			res.IsTruncated = true
			break
		}
		if m.CommonPrefix {
			if !seen[m.MatchedPart] {
				seen[m.MatchedPart] = true
				res.CommonPrefixes = append(res.CommonPrefixes, m.AsCommonPrefix())
				count++
			}
			continue
		}
		res.Uploads = append(res.Uploads, gofakes3.ListMultipartUploadItem{Key: u.key, UploadID: u.id, StorageClass: gofakes3.StorageStandard, Initiated: gofakes3.NewContentTime(u.initiated)})
		res.NextKeyMarker, res.NextUploadIDMarker = u.key, u.id
		count++
	}
	if !res.IsTruncated {
		res.NextKeyMarker, res.NextUploadIDMarker = "", ""
	}
	return res, nil
}

// AbortMultipartUpload ends an upload and removes its parts' files.
func (s *uploads) AbortMultipartUpload(bucket, key string, id gofakes3.UploadID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, err := s.get(bucket, key, id)
	if err != nil {
		return err
	}
	s.removeLocked(u)
	return nil
}

// removeLocked forgets u and removes its directory; s.mu is held. A part
// being received finds its upload gone when it ends, and removes its file.
func (s *uploads) removeLocked(u *upload) {
	delete(s.byID, u.id)
	os.RemoveAll(filepath.Join(s.dir, string(u.id)))
}

// CompleteMultipartUpload is complete, of parts that list no checksum:
// the store answers CompleteMultipartUpload itself (Server.route).
func (s *uploads) CompleteMultipartUpload(bucket, key string, id gofakes3.UploadID, input *gofakes3.CompleteMultipartUploadRequest) (gofakes3.VersionID, string, error) {
	parts := make([]completedPart, len(input.Parts))
	for i, p := range input.Parts {
		parts[i] = completedPart{PartNumber: p.PartNumber, ETag: p.ETag}
	}
	etag, _, err := s.complete(bucket, key, id, parts, http.Header{})
	return "", etag, err
}

// complete stores the object of the parts that input names, in its
// order, and ends the upload. Its ETag is S3's: the MD5 of the parts'
// MD5s, and their number (kept beside the hash: see partsKey). An upload
// that keeps checksums checks those that input lists, and keeps the
// object's (completeChecksum), which it returns; h is the request's
// header.
func (s *uploads) complete(bucket, key string, id gofakes3.UploadID, input []completedPart, h http.Header) (string, objectChecksum, error) {
	s.mu.Lock()
	u, err := s.get(bucket, key, id)
	if err != nil {
		s.mu.Unlock()
		return "", objectChecksum{}, err
	}
	if len(input) == 0 {
		s.mu.Unlock()
		return "", objectChecksum{}, gofakes3.ErrorMessage(gofakes3.ErrMalformedXML, "a CompleteMultipartUpload must name at least one part")
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	var readers []io.Reader
	var listed []*part
	var layout partLayout
	sums := md5.New()
	for i, in := range input {
		if i > 0 && in.PartNumber <= input[i-1].PartNumber {
			s.mu.Unlock()
			closeAll()
			return "", objectChecksum{}, gofakes3.ErrInvalidPartOrder
		}
		p := u.parts[in.PartNumber]
		if p == nil || strings.Trim(in.ETag, `"`) != hex.EncodeToString(p.md5) {
			s.mu.Unlock()
			closeAll()
			return "", objectChecksum{}, gofakes3.ErrorMessagef(gofakes3.ErrInvalidPart, "part %d was not uploaded, or its ETag is not %s", in.PartNumber, in.ETag)
		}
		listed = append(listed, p)
		// Opened under the lock: a part sent again, or an abort, removes
		// a file, but not what this completion reads.
		f, err := os.Open(p.file)
		if err != nil {
			s.mu.Unlock()
			closeAll()
			return "", objectChecksum{}, gofakes3.ErrorMessage(gofakes3.ErrInternal, fmt.Sprintf("part %d: %v", in.PartNumber, withoutPath(err)))
		}
		files = append(files, f)
		readers = append(readers, io.LimitReader(f, p.size))
		sums.Write(p.md5)
		layout.sizes = append(layout.sizes, p.size)
		if u.sum.algo != "" {
			layout.sums = append(layout.sums, p.sum.value)
		}
	}
	meta := u.meta
	sum, err := completeChecksum(u.sum, input, listed, h)
	if err == nil && u.sum.algo == "" {
		sum = defaultUploadChecksum(listed)
	}
	s.mu.Unlock()
	defer closeAll()
	if err != nil {
		return "", objectChecksum{}, err
	}
	hash := sums.Sum(nil)
	if err := s.join(bucket, key, meta, readers, hash, layout, sum); err != nil {
		return "", objectChecksum{}, err
	}
	s.mu.Lock()
	if s.byID[id] == u {
		s.removeLocked(u)
	}
	s.mu.Unlock()
	return fmt.Sprintf(`"%s-%d"`, hex.EncodeToString(hash), len(input)), sum, nil
}

// join writes the parts (readers of their files) one after the other to
// a new file under tmp/, syncs it, and commits it as bucket/key. The
// parts are copied by the kernel (io.Copy between files is
// copy_file_range on Linux): not read into the process, nor hashed
// again; the object's hash is the parts' (hash), its layout theirs, its
// checksum sum (made of the parts').
func (s *uploads) join(bucket, key string, meta map[string]string, parts []io.Reader, hash []byte, layout partLayout, sum objectChecksum) error {
	out, err := os.CreateTemp(s.tmp, "put-")
	if err != nil {
		return notKept("the object cannot be joined", err)
	}
	for _, p := range parts {
		if err == nil {
			_, err = io.Copy(out, p)
		}
	}
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out.Name())
		return notKept("the object cannot be joined", err)
	}
	if err := s.commit(bucket, key, meta, out.Name(), hash, layout, sum); err != nil {
		os.Remove(out.Name())
		return err
	}
	return nil
}

// abortIdle is Server.AbortIdleUploads.
func (s *uploads) abortIdle(idle time.Duration) int {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range s.byID {
		if u.receiving == 0 && now.Sub(u.touched) > idle {
			s.removeLocked(u)
			n++
		}
	}
	return n
}

// partNotKept is the answer to a part that could not be written to the
// store's disk (notKept).
func partNotKept(err error) error {
	return notKept("the part cannot be kept", err)
}

// withoutPath returns the cause of a file system error without the path it
// names, so that an answer does not show where the data directory is.
func withoutPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError // a rename's, which names both paths
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
