package sim

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"qshare"
	"qshare/config/configtest"
)

// FuzzReadTrace: whatever the CSV, ReadTrace never panics; it returns jobs
// that name the configuration's shares with a positive demand, or an
// EINVALID error.
//
//	go test ./sim -run '^$' -fuzz FuzzReadTrace -fuzztime 60s
func FuzzReadTrace(f *testing.F) {
	if data, err := os.ReadFile("../examples/three-shares-trace.csv"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("job_id,submit_s,duration_s,quota_share,instance_type,instance_count\nj,0,1,QS1,ml.g5.xlarge,1\nj,0,1,QS1,ml.p4d.24xlarge,2\n"))
	f.Add([]byte("instance_count,quota_share,job_id,duration_s,submit_s,instance_type\n1,QS2,\"a\"\"b\",1e3,0.5,t\n"))
	cfg := configtest.Load(f, "../examples/three-shares.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, skip := range []bool{false, true} {
			jobs, _, err := ReadTrace(bytes.NewReader(data), cfg, TraceOptions{Name: "fuzz", SkipBadRows: skip})
			if err != nil {
				var qe *qshare.Error
				if !errors.As(err, &qe) || qe.Code != qshare.EINVALID {
					t.Fatalf("error %T %v is not EINVALID", err, err)
				}
				continue
			}
			for i, j := range jobs {
				if cfg.Queue(j.Queue) == nil || cfg.Queue(j.Queue).Share(j.Share) == nil || j.Demand.Total() < 1 || j.Submit < 0 || j.Duration < 0 {
					t.Fatalf("bad job %+v", j)
				}
				if i > 0 && j.Submit < jobs[i-1].Submit {
					t.Fatalf("jobs not sorted")
				}
			}
		}
	})
}
