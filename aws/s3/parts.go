package s3

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Multipart parts on disk. gofakes3's uploader keeps every part of a
// multipart upload in memory until the upload completes, and then joins
// them into one more copy in memory for the backend: a 5 GiB model took
// 10 GiB of the server's memory. Here each part's body goes to a file of
// its own under partsDir, and gofakes3 is given in its place a short
// reference to that file (partRef), which it keeps, lists and joins as it
// did the part. When the upload completes, gofakes3 hands the backend the
// joined references, and wholeBackend.PutObject reads the files they name
// in their order, streaming the object to its place. The protocol (the
// upload's ID, part numbers, ETags, listings, the XML) stays gofakes3's.
//
// Only an upload that this store started reads files so: its metadata
// carries partsMarker, which ServeHTTP takes out of every request and puts
// in a CreateMultipartUpload alone; a PutObject whose body looks like a
// reference is stored as it is.

// partsDir is where parts are kept, under tmp/ (emptied at start: an
// upload in progress is lost at a restart, as it was).
const partsDir = "parts"

// partsMarker is the metadata header that marks an upload of this store.
const partsMarker = "X-Amz-Qshare-Parts"

// refPrefix starts each reference; a reference is one line.
const refPrefix = "qshare-part "

// uploadID is a gofakes3 upload's ID as a path component: it makes them
// of decimal digits; any other is refused before a file is made.
func uploadIDDir(id string) (string, bool) {
	if id == "" || len(id) > 40 || strings.Trim(id, "0123456789") != "" {
		return "", false
	}
	return id, true
}

// spoolPart writes the body of an UploadPart request to a file under
// root/tmp/parts/<upload id>/ and replaces the body with a reference to
// it. It returns the file, which the caller removes when gofakes3 does not
// take the part; or, when the body could not be kept, the answer's
// status, code and message (a body that failed to be read: "", for the
// caller to answer with the body's own error).
func spoolPart(root string, r *http.Request) (name string, status int, code, msg string) {
	id, ok := uploadIDDir(r.URL.Query().Get("uploadId"))
	if !ok {
		return "", http.StatusNotFound, "NoSuchUpload", "The specified upload does not exist"
	}
	dir := filepath.Join(root, tmpDir, partsDir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", http.StatusServiceUnavailable, "ServiceUnavailable", partNotKept(err)
	}
	f, err := os.CreateTemp(dir, "part-")
	if err != nil {
		return "", http.StatusServiceUnavailable, "ServiceUnavailable", partNotKept(err)
	}
	sum := md5.New()
	n, err := io.Copy(io.MultiWriter(f, sum), r.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		status, code, msg = http.StatusBadRequest, "", "the body could not be read to its end: "+err.Error()
	case r.ContentLength >= 0 && n != r.ContentLength:
		status, code, msg = http.StatusBadRequest, "IncompleteBody", "You did not provide the number of bytes specified by the Content-Length HTTP header"
	case r.Header.Get("Content-Md5") != "" && r.Header.Get("Content-Md5") != base64.StdEncoding.EncodeToString(sum.Sum(nil)):
		status, code, msg = http.StatusBadRequest, "BadDigest", "The Content-MD5 you specified did not match what we received"
	}
	if status != 0 {
		os.Remove(f.Name())
		return "", status, code, msg
	}
	r.Header.Del("Content-Md5")
	ref := []byte(refPrefix + id + " " + filepath.Base(f.Name()) + " " + strconv.FormatInt(n, 10) + " " + hex.EncodeToString(sum.Sum(nil)) + "\n")
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(ref)), int64(len(ref))
	r.Header.Set("Content-Length", strconv.Itoa(len(ref)))
	return f.Name(), 0, "", ""
}

// partNotKept says why a part could not be written to the store's disk,
// without the server's paths: the client sees the cause, not where the
// data directory is.
func partNotKept(err error) string {
	return "the part cannot be kept on the store's disk: " + withoutPath(err).Error()
}

// withoutPath returns the cause of a file system error without the path it
// names, so that an answer does not show where the data directory is.
func withoutPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// removeParts removes the part files of the upload of r (a completed or
// aborted one).
func removeParts(root string, r *http.Request) {
	if id, ok := uploadIDDir(r.URL.Query().Get("uploadId")); ok {
		os.RemoveAll(filepath.Join(root, tmpDir, partsDir, id))
	}
}

// openParts reads the joined references of a completed upload (body) and
// returns a reader of the parts they name, in order, and its size. Only
// part files of the store's parts directory are named.
func openParts(root string, body io.Reader) (io.ReadCloser, int64, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	fail := func(err error) (io.ReadCloser, int64, error) {
		closeAll()
		return nil, 0, err
	}
	var readers []io.Reader
	var size int64
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		f := strings.Fields(strings.TrimPrefix(sc.Text(), refPrefix))
		if !strings.HasPrefix(sc.Text(), refPrefix) || len(f) != 4 || !strings.HasPrefix(f[1], "part-") || f[1] != filepath.Base(f[1]) {
			return fail(errors.New("s3: a part of a multipart upload is not a reference to its file"))
		}
		id, ok := uploadIDDir(f[0])
		n, err := strconv.ParseInt(f[2], 10, 64)
		if !ok || err != nil || n < 0 {
			return fail(errors.New("s3: a part of a multipart upload is not a reference to its file"))
		}
		fh, err := os.Open(filepath.Join(root, tmpDir, partsDir, id, f[1]))
		if err != nil {
			return fail(fmt.Errorf("s3: part %s of multipart upload %s: %w", f[1], id, withoutPath(err)))
		}
		files = append(files, fh)
		readers = append(readers, io.LimitReader(fh, n))
		size += n
	}
	if err := sc.Err(); err != nil {
		return fail(err)
	}
	return &partsReader{Reader: io.MultiReader(readers...), close: closeAll}, size, nil
}

type partsReader struct {
	io.Reader
	close func()
}

func (p *partsReader) Close() error { p.close(); return nil }
