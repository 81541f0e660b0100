package s3_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	s3server "qshare/aws/s3"
)

// send sends a request to the store at url and returns its status and
// body; a body of unknown length when chunked.
func send(t *testing.T, method, url string, body []byte, chunked bool) (int, string) {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd) // hides the length: sent chunked
	}
	return raw(t, method, url, map[string]string{"Content-Type": "application/xml"}, rd)
}

// TestXMLBodyCap: a request that sends no object's data (here
// CompleteMultipartUpload and DeleteObjects) with an XML body over
// MaxXMLBody, of announced length or chunked, is refused with S3's
// MaxMessageLengthExceeded (400, not a 500), and changes nothing: the
// upload can still be completed, the objects are still there. Past the
// cap the store reads at most 4 MiB more, and throws it away, so that a
// client still writing the body reads the answer, not a reset of the
// connection closed under its write.
func TestXMLBodyCap(t *testing.T) {
	ts, c := startWith(t, t.TempDir(), "bkt")
	ctx := context.Background()
	mustPut(t, c, "keep", "x")
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m")})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("tail")})
	if err != nil {
		t.Fatal(err)
	}
	huge := []byte("<CompleteMultipartUpload>" + strings.Repeat("<Part><PartNumber>1</PartNumber><ETag>"+aws.ToString(part.ETag)+"</ETag></Part>", s3server.MaxXMLBody/60) + "</CompleteMultipartUpload>")
	del := []byte("<Delete>" + strings.Repeat("<Object><Key>keep</Key></Object>", s3server.MaxXMLBody/30) + "</Delete>")
	for _, chunked := range []bool{false, true} {
		for _, r := range []struct {
			what, method, url string
			body              []byte
		}{
			{"CompleteMultipartUpload", "POST", ts.URL + "/bkt/m?uploadId=" + aws.ToString(mp.UploadId), huge},
			{"DeleteObjects", "POST", ts.URL + "/bkt?delete", del},
		} {
			if len(r.body) <= s3server.MaxXMLBody {
				t.Fatalf("%s: a body of %d bytes is not over the cap", r.what, len(r.body))
			}
			st, body := send(t, r.method, r.url, r.body, chunked)
			if st != http.StatusBadRequest || !strings.Contains(body, "<Code>MaxMessageLengthExceeded</Code>") {
				t.Errorf("%s of %d bytes (chunked %v): %d %s, want 400 MaxMessageLengthExceeded", r.what, len(r.body), chunked, st, body)
			}
		}
	}
	if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("keep")}); err != nil {
		t.Errorf("the refused DeleteObjects deleted the object: %v", err)
	}
	if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("m")}); err == nil {
		t.Errorf("the refused CompleteMultipartUpload made the object")
	}
	small := `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>` + aws.ToString(part.ETag) + `</ETag></Part></CompleteMultipartUpload>`
	if st, body := send(t, "POST", ts.URL+"/bkt/m?uploadId="+aws.ToString(mp.UploadId), []byte(small), false); st != http.StatusOK {
		t.Fatalf("the upload could not be completed after the refusals: %d %s", st, body)
	}
}

// TestIdleDeadlines: behind IdleDeadlines, a PutObject whose body keeps
// coming takes longer than the HTTP server's whole-request ReadTimeout and
// is stored whole; one that stops sending for longer than the idle time is
// cut off, and leaves no object.
func TestIdleDeadlines(t *testing.T) {
	srv, err := s3server.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 400 * time.Millisecond
	ts := httptest.NewUnstartedServer(s3server.IdleDeadlines(srv, timeout, timeout))
	ts.Config.ReadTimeout, ts.Config.WriteTimeout = timeout, timeout
	ts.Start()
	defer ts.Close()
	if st, body := send(t, "PUT", ts.URL+"/bkt", nil, false); st != http.StatusOK {
		t.Fatalf("CreateBucket: %d %s", st, body)
	}
	put := func(key string, pause time.Duration, n int) error {
		pr, pw := io.Pipe()
		go func() {
			for i := 0; i < n; i++ {
				time.Sleep(pause)
				if _, err := pw.Write(bytes.Repeat([]byte{'a'}, 1000)); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("PUT", ts.URL+"/bkt/"+key, pr)
		req.ContentLength = int64(n * 1000)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return &statusError{resp.StatusCode, string(b)}
		}
		return nil
	}
	// 10 pieces 150 ms apart: 1.5 s, beyond the 400 ms ReadTimeout.
	if err := put("slow", 150*time.Millisecond, 10); err != nil {
		t.Fatalf("a PutObject whose body kept coming for 1.5 s was cut: %v", err)
	}
	st, body := send(t, "GET", ts.URL+"/bkt/slow", nil, false)
	if st != http.StatusOK || len(body) != 10000 {
		t.Fatalf("GetObject of the slow object: %d, %d bytes, want 10000", st, len(body))
	}
	// A body that stops for 1.2 s, three times the idle time.
	if err := put("stalled", 1200*time.Millisecond, 2); err == nil {
		t.Fatalf("a PutObject whose body stalled for 1.2 s was taken")
	}
	if st, _ := send(t, "HEAD", ts.URL+"/bkt/stalled", nil, false); st != http.StatusNotFound {
		t.Errorf("the stalled PutObject left an object: HEAD answered %d", st)
	}
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return http.StatusText(e.status) + ": " + e.body }

// TestPartsOnDisk: a multipart upload's parts are kept in files under
// tmp/parts/<upload id>/, not in memory, each of its part's size; the
// completed object is the parts joined, and completing or aborting the
// upload removes the files.
func TestPartsOnDisk(t *testing.T) {
	dir := t.TempDir()
	_, c := startWith(t, dir, "bkt")
	ctx := context.Background()
	partFiles := func(id string) (sizes []int64) {
		ents, _ := os.ReadDir(filepath.Join(dir, "tmp", "parts", id))
		for _, e := range ents {
			if fi, err := e.Info(); err == nil {
				sizes = append(sizes, fi.Size())
			}
		}
		sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
		return sizes
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 6<<16) // 6 MiB
	for _, complete := range []bool{true, false} {
		mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj")})
		if err != nil {
			t.Fatal(err)
		}
		id := aws.ToString(mp.UploadId)
		parts := uploadParts(t, c, "bkt", "obj", mp.UploadId, big, []byte("tail"))
		if got := partFiles(id); len(got) != 2 || got[0] != 4 || got[1] != int64(len(big)) {
			t.Fatalf("upload %s keeps part files of sizes %v, want 4 and %d", id, got, len(big))
		}
		if !complete {
			if _, err := c.AbortMultipartUpload(ctx, &sdk.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), UploadId: mp.UploadId}); err != nil {
				t.Fatal(err)
			}
		} else if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			t.Fatal(err)
		}
		if got := partFiles(id); len(got) != 0 {
			t.Errorf("complete %v: upload %s still keeps part files %v", complete, id, got)
		}
	}
	obj, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(got, append(append([]byte(nil), big...), "tail"...)) {
		t.Fatalf("the completed object has %d bytes, not the parts joined (%d)", len(got), len(big)+4)
	}
}
