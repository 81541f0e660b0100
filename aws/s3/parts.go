package s3

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/johannesboyne/gofakes3"

	"qshare/aws/wire"
)

// The parts of a completed multipart upload's object. The store keeps
// the object in one file, and beside it, in its metadata, the size of
// each part and, where the upload kept them, each part's checksum
// (partLayout), so that a GET or HEAD of one part (partNumber) answers as
// S3 does: that part's bytes (206, their Content-Range in the whole),
// x-amz-mp-parts-count, and the part's own checksum where the object's is
// COMPOSITE. A client that reads an object by its parts (the AWS SDK for
// Go's transfer manager) then checks each part's bytes against it: the
// COMPOSITE checksum of the whole is one that no SDK checks.

// ownPrefix begins the metadata entries that are the store's own, never a
// client's and never answered as a header.
const ownPrefix = "X-Amz-Qshare-"

const (
	// partSizesKey is the metadata of a multipart object's part sizes:
	// runs of equal sizes, "<size>*<count>" (or "<size>" for one),
	// joined by commas: "8388608*127,1048576".
	partSizesKey = ownPrefix + "Part-Sizes"
	// partSumsKey is the metadata of its parts' checksums, base64 in the
	// object's checksum algorithm, joined by commas.
	partSumsKey = ownPrefix + "Part-Checksums"
)

// partLayout is the parts a completed multipart upload's object was
// joined from, in their order: none for an object put whole.
type partLayout struct {
	sizes []int64
	// sums is each part's checksum (base64), or nil where the upload
	// kept none.
	sums []string
}

// keep makes l the layout that meta holds: none of the old object's, nor
// any entry of the store's own that a client's header set.
func (l partLayout) keep(meta map[string]string) {
	for k := range meta {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), ownPrefix) {
			delete(meta, k)
		}
	}
	delete(meta, partsKey)
	if len(l.sizes) == 0 {
		return
	}
	meta[partsKey] = strconv.Itoa(len(l.sizes))
	var runs []string
	for i := 0; i < len(l.sizes); {
		j := i + 1
		for j < len(l.sizes) && l.sizes[j] == l.sizes[i] {
			j++
		}
		run := strconv.FormatInt(l.sizes[i], 10)
		if j-i > 1 {
			run += "*" + strconv.Itoa(j-i)
		}
		runs = append(runs, run)
		i = j
	}
	meta[partSizesKey] = strings.Join(runs, ",")
	if len(l.sums) == len(l.sizes) {
		meta[partSumsKey] = strings.Join(l.sums, ",")
	}
}

// layoutOf reads the layout that get (a metadata entry's, or an answer's
// header's value) gives, or reports false where there is none, or it is
// not whole: an object put whole, or completed by a store before it kept
// layouts. A part has a byte at least (the store refuses an empty one,
// as gofakes3 does), so that a Range names each.
func layoutOf(get func(string) string) (partLayout, bool) {
	var l partLayout
	count, err := strconv.Atoi(get(partsKey))
	if err != nil || count < 1 || count > gofakes3.MaxUploadPartNumber {
		return l, false
	}
	for _, run := range strings.Split(get(partSizesKey), ",") {
		size, times, _ := strings.Cut(run, "*")
		n, err := strconv.ParseInt(size, 10, 64)
		k := 1
		if times != "" {
			k, err = strconv.Atoi(times)
		}
		if err != nil || n < 1 || k < 1 || len(l.sizes)+k > count {
			return partLayout{}, false
		}
		for ; k > 0; k-- {
			l.sizes = append(l.sizes, n)
		}
	}
	if len(l.sizes) != count {
		return partLayout{}, false
	}
	if s := get(partSumsKey); s != "" {
		if l.sums = strings.Split(s, ","); len(l.sums) != count {
			l.sums = nil
		}
	}
	return l, true
}

// span is where part n (from 1) lies in the object: its first byte and
// its size.
func (l partLayout) span(n int) (start, size int64) {
	for _, s := range l.sizes[:n-1] {
		start += s
	}
	return start, l.sizes[n-1]
}

// partRead is a GET or HEAD of one part of a multipart object: the part,
// their number, and what the object looked up was (its hash's ETag and
// its sizes' entry), which the answer's object must be: one put over it
// meanwhile has other parts.
type partRead struct {
	n, count    int
	etag, sizes string // the ETag as gofakes3 answers it, "<hash>"
	sum         string // the part's checksum, or ""
}

// partNumber checks the partNumber of a GET or HEAD of an object, and
// turns a read of one part of a multipart object (one whose layout the
// store keeps) into a read of its bytes' range, whose answer etagWriter
// (given the read) makes S3's. An object put whole is answered as S3
// does: part 1 is the whole object, and any other part is not
// satisfiable (gofakes3 would answer the whole object for every part
// number, which a client reading part 2 would take for part 2). A part
// past the last is not satisfiable either.
func (s *Server) partNumber(r *http.Request, w *etagWriter) *wire.Error {
	q := r.URL.Query()
	if !q.Has("partNumber") {
		return nil
	}
	n, err := strconv.Atoi(q.Get("partNumber"))
	switch {
	case err != nil || n < 1 || n > gofakes3.MaxUploadPartNumber:
		return s3Error(http.StatusBadRequest, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive")
	case r.Header.Get("Range") != "":
		return s3Error(http.StatusBadRequest, "InvalidRequest", "Cannot specify both Range header and partNumber query parameter")
	}
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	meta, found := s.backend.metadata(bucket, key)
	if !found { // gofakes3 answers NoSuchKey or NoSuchBucket
		return nil
	}
	l, ok := layoutOf(func(k string) string { return meta.Meta[k] })
	if (!ok && n > 1) || (ok && n > len(l.sizes)) {
		return s3Error(http.StatusRequestedRangeNotSatisfiable, "InvalidPartNumber", "The requested partnumber is not satisfiable")
	}
	if !ok {
		return nil
	}
	read := &partRead{n: n, count: len(l.sizes), etag: `"` + hex.EncodeToString(meta.Hash) + `"`, sizes: meta.Meta[partSizesKey]}
	if l.sums != nil && keptChecksum(meta.Meta).typ == composite {
		read.sum = l.sums[n-1]
	}
	start, size := l.span(n)
	r.Header.Set("Range", "bytes="+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(start+size-1, 10))
	w.part = read
	return nil
}

// metadata is the metadata that the store keeps of bucket/key, as
// s3afero wrote it (none where it cannot be read: the backend makes it
// again on the read, of an object of no parts), and whether there is an
// object (not amid a commit).
func (b *wholeBackend) metadata(bucket, key string) (metadataFile, bool) {
	if bucket == "" || bucket == "." || bucket == ".." || key == "" {
		return metadataFile{}, false
	}
	b.objects.RLock()
	defer b.objects.RUnlock()
	if st, err := os.Stat(filepath.Join(b.root, "buckets", bucket, filepath.FromSlash(key))); err != nil || !st.Mode().IsRegular() {
		return metadataFile{}, false
	}
	return b.readMetadata(bucket, key), true
}

// metadataFile is the part of s3afero's metadata file that the store
// reads itself.
type metadataFile struct {
	Hash []byte
	Meta map[string]string
}

// readMetadata is the metadata file of bucket/key, or none where it
// cannot be read; b.objects is held.
func (b *wholeBackend) readMetadata(bucket, key string) metadataFile {
	var m metadataFile
	if js, err := os.ReadFile(filepath.Join(b.root, "metadata", bucket, metaName(key))); err != nil || json.Unmarshal(js, &m) != nil {
		return metadataFile{}
	}
	return m
}
