package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"qshare/data"
	"qshare/fanout"
	"qshare/internal/seaweedfs"
	"qshare/internal/toolcache"
	"qshare/internal/versitygw"
	"qshare/trainingjob"
)

// startJobs is how many jobs of each kind (with a channel, without)
// s3Starts runs, one at a time, alternating.
const startJobs = 5

// startedRE finds the time (Unix nanoseconds) that a job's program printed
// first thing.
var startedRE = regexp.MustCompile(`program started at (\d+)`)

// s3Starts measures, on a `qshare serve --executor process` of its own,
// the time from SubmitServiceJob to the job's program running, for jobs
// with one channel of a channelBytes object in the server's embedded
// store and for jobs with none, and returns the medians (seconds). Jobs
// run one at a time. The program prints its start time; the bench reads
// it from the job's log.
func s3Starts(ctx context.Context, srv *Server, c *batch.Client, queue string, channelBytes int64) (with, without float64, err error) {
	sc, err := data.NewClient(ctx, data.Endpoint{URL: srv.Endpoint, Region: "us-east-1", AccessKeyID: "qshare", SecretAccessKey: "qshare"})
	if err != nil {
		return 0, 0, err
	}
	if _, err := sc.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("starts")}); err != nil {
		return 0, 0, fmt.Errorf("bench s3: %w", err)
	}
	body := make([]byte, channelBytes)
	rand.Read(body)
	if _, err := sc.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("starts"), Key: aws.String("channel/data.bin"), Body: bytes.NewReader(body)}); err != nil {
		return 0, 0, fmt.Errorf("bench s3: %w", err)
	}
	entry := []string{"/bin/sh", "-c", `echo "program started at $(date +%s%N)"`}
	var ds [2][]float64
	for i := 0; i < 2*startJobs; i++ {
		withChannel := i%2 == 0
		name := fmt.Sprintf("start-%d", i)
		payload := payloadWith(name, e2eType, 1, entry, nil, func(r *trainingjob.Request) {
			if withChannel {
				r.InputDataConfig = []trainingjob.Channel{{ChannelName: "train", DataSource: trainingjob.DataSource{S3DataSource: &trainingjob.S3DataSource{S3Uri: "s3://starts/channel/"}}}}
			}
		})
		t0 := time.Now()
		out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String(queue), QuotaShareName: aws.String("s0"),
			ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload)})
		if err != nil {
			return 0, 0, fmt.Errorf("bench s3: submit: %w", err)
		}
		started, err := awaitStarted(ctx, srv.Endpoint, c, aws.ToString(out.JobId))
		if err != nil {
			return 0, 0, err
		}
		k := 1
		if withChannel {
			k = 0
		}
		ds[k] = append(ds[k], started.Sub(t0).Seconds())
	}
	return medianOf(ds[0]), medianOf(ds[1]), nil
}

// awaitStarted waits until job id has SUCCEEDED and returns the start
// time its program printed in its log.
func awaitStarted(ctx context.Context, endpoint string, c *batch.Client, id string) (time.Time, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			return time.Time{}, fmt.Errorf("bench s3: %w", err)
		}
		switch d.Status {
		case types.ServiceJobStatusFailed:
			return time.Time{}, fmt.Errorf("bench s3: job %s FAILED: %s", id, aws.ToString(d.StatusReason))
		case types.ServiceJobStatusSucceeded:
			resp, err := http.Get(endpoint + "/qshare/v1/logs/" + url.PathEscape(id))
			if err != nil {
				return time.Time{}, fmt.Errorf("bench s3: %w", err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			m := startedRE.FindSubmatch(b)
			if m == nil {
				return time.Time{}, fmt.Errorf("bench s3: job %s's log has no start time:\n%s", id, b)
			}
			ns, _ := strconv.ParseInt(string(m[1]), 10, 64)
			return time.Unix(0, ns), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("bench s3: job %s is still %s after 5 minutes", id, d.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return round(s[len(s)/2], 3)
}

// storeRate is one store's PutObject and GetObject throughput, in MB/s,
// for small objects (many, in parallel) and big ones (one at a time).
type storeRate struct {
	SmallPut, SmallGet, BigPut, BigGet float64
}

// Throughput sizes: small objects of ObjectBytes, storeSmall of them, 8 at
// a time; big ones of storeBigBytes, storeBig of them, one at a time.
const (
	storeSmall    = 200
	storeBig      = 4
	storeBigBytes = 64 << 20
	storeParallel = 8
)

// rateOf measures PutObject and GetObject on the store at ep with the SDK's
// S3 client, as package data configures it: the same client, the same
// objects, for every store.
func rateOf(ctx context.Context, ep data.Endpoint, small int64) (storeRate, error) {
	var r storeRate
	dc, err := data.NewClient(ctx, ep)
	if err != nil {
		return r, err
	}
	c := dc.S3()
	if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("rate")}); err != nil {
		return r, fmt.Errorf("bench s3: %s: %w", ep.URL, err)
	}
	smallBody, bigBody := make([]byte, small), make([]byte, storeBigBytes)
	rand.Read(smallBody)
	rand.Read(bigBody)
	phase := func(n, parallel int, body []byte, get bool) (float64, error) {
		t0 := time.Now()
		err := fanout.Each(ctx, parallel, n, func(ctx context.Context, i int) error {
			key := aws.String(fmt.Sprintf("%d/%05d", len(body), i))
			if !get {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("rate"), Key: key, Body: bytes.NewReader(body)})
				return err
			}
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("rate"), Key: key})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			got, err := io.Copy(io.Discard, out.Body)
			if err == nil && got != int64(len(body)) {
				err = fmt.Errorf("GetObject read %d bytes of %d", got, len(body))
			}
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("bench s3: %s: %w", ep.URL, err)
		}
		return round(float64(n*len(body))/1e6/time.Since(t0).Seconds(), 1), nil
	}
	for _, p := range []struct {
		n, parallel int
		body        []byte
		get         bool
		to          *float64
	}{
		{storeSmall, storeParallel, smallBody, false, &r.SmallPut},
		{storeSmall, storeParallel, smallBody, true, &r.SmallGet},
		{storeBig, 1, bigBody, false, &r.BigPut},
		{storeBig, 1, bigBody, true, &r.BigGet},
	} {
		if *p.to, err = phase(p.n, p.parallel, p.body, p.get); err != nil {
			return r, err
		}
	}
	return r, nil
}

// s3Stores measures the embedded store of srv (through qshare serve's
// router, as jobs reach it), then a versitygw and a SeaweedFS, each over a
// directory of its own under dir, one after the other, with the same
// client and objects. It returns a third party's rates as nil, with the
// reason, where its binary is absent.
func s3Stores(ctx context.Context, srv *Server, dir string, small int64) (embedded storeRate, vgw, sw *storeRate, vgwNote, swNote string, err error) {
	embedded, err = rateOf(ctx, data.Endpoint{URL: srv.Endpoint, Region: "us-east-1", AccessKeyID: "qshare", SecretAccessKey: "qshare"}, small)
	if err != nil {
		return embedded, nil, nil, "", "", err
	}
	if vgw, vgwNote, err = thirdPartyRate(ctx, dir, "versitygw", versitygw.Available, versitygw.Start, small); err != nil {
		return
	}
	sw, swNote, err = thirdPartyRate(ctx, dir, "seaweedfs", seaweedfs.Available, seaweedfs.Start, small)
	return
}

// thirdPartyRate measures the third-party server (name) that start runs
// over a new directory under dir, stops it, and removes the directory (the
// objects written, about 456 MiB, which --runs would pile up). It returns
// nil rates, and the reason, where available says its binary is absent.
func thirdPartyRate(ctx context.Context, dir, name string, available func() error, start func(context.Context, string) (*toolcache.S3Server, error), small int64) (*storeRate, string, error) {
	if err := available(); err != nil {
		return nil, err.Error(), nil
	}
	d, err := os.MkdirTemp(dir, name+"-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(d)
	srv, err := start(ctx, d)
	if err != nil {
		return nil, "", err
	}
	defer srv.Close()
	r, err := rateOf(ctx, data.Endpoint{URL: srv.URL, Region: "us-east-1", AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}, small)
	return &r, "", err
}
