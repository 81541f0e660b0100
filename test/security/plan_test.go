package security_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"qshare"
	"qshare/internal/batchclient"
	"qshare/internal/serveproc"
)

// TestPlanChangeRacesAMove: alice may update quota share QS1 only, so
// she may put and delete the capacity plans of QS1 but not those of QS2.
// While she keeps replacing (then deleting) plan P of QS1, the admin moves
// P to QS2. A server that checks the old plan's share before the change,
// rather than inside it, lets a request of alice's that read "QS1" replace
// or delete P after it moved: she changes a plan of QS2 (issue 30, point
// 7). Each round ends in a state that only a refused request of hers could
// have made if she did.
func TestPlanChangeRacesAMove(t *testing.T) {
	t.Parallel() // a server of its own, and mostly waiting (TestMain)
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(file, []byte(`principals:
  - name: alice
    accessKeys: [{id: `+aliceKey[0]+`, secret: `+aliceKey[1]+`}]
    policies: [plans-of-qs1]
  - name: admin
    accessKeys: [{id: `+adminKey[0]+`, secret: `+adminKey[1]+`}]
    policies: [admin]
policies:
  plans-of-qs1:
    Version: "2012-10-17"
    Statement:
      - Effect: Allow
        Action: [batch:PutCapacityPlan, batch:DeleteCapacityPlan, batch:DescribeCapacityPlans]
        Resource: "*"
      - Effect: Allow
        Action: batch:UpdateQuotaShare
        Resource: arn:aws:batch:*:*:job-queue/training/quota-share/QS1
  admin:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: "batch:*", Resource: "*"}]
`), 0o600))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "error", "--auth", file}})
	setupTraining(t, signedClient(srv.Endpoint, adminKey), "ml.m5.xlarge")
	plans := func(key [2]string) *planClient {
		return &planClient{url: srv.Endpoint + qshare.PlansPath + "/P", hc: &http.Client{Timeout: 30 * time.Second, Transport: &batchclient.SigningTransport{
			Creds: credentials.NewStaticCredentialsProvider(key[0], key[1], ""), Region: "us-east-1"}}}
	}
	alice, admin := plans(aliceKey), plans(adminKey)
	start := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	body := func(share string, count int64) qshare.PlanBody {
		return qshare.PlanBody{JobQueue: "training", QuotaShareName: share, InstanceType: "ml.m5.xlarge", InstanceCount: count,
			StartTime: start.Format(time.RFC3339), EndTime: start.Add(time.Hour).Format(time.RFC3339)}
	}
	const rounds, racers = 40, 4
	var aliceOK, aliceRefused atomic.Int64
	for round := 0; round < rounds; round++ {
		del := round%2 == 1 // odd rounds: alice deletes; even: she replaces
		if code, msg := admin.do(t, http.MethodPut, body("QS1", 1)); code != http.StatusOK {
			t.Fatalf("round %d: the admin's plan of QS1: %d %s", round, code, msg)
		}
		// Alice's requests, as fast as they go, until the move is done
		// and a last one of each racer has run.
		var stop atomic.Bool
		var wg sync.WaitGroup
		for i := 0; i < racers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					method, b := http.MethodPut, any(body("QS1", 2))
					if del {
						method, b = http.MethodDelete, nil
					}
					switch code, msg := alice.do(t, method, b); code {
					case http.StatusOK:
						aliceOK.Add(1)
					case http.StatusForbidden:
						aliceRefused.Add(1)
					case http.StatusBadRequest: // a delete after hers: no such plan
						if !del || !strings.Contains(msg, "does not exist") {
							t.Errorf("alice's %s: %d %s", method, code, msg)
							return
						}
					default:
						t.Errorf("alice's %s: %d %s", method, code, msg)
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond) // land the move at different points of her requests
		if code, msg := admin.do(t, http.MethodPut, body("QS2", 3)); code != http.StatusOK {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("round %d: the admin's move of P to QS2: %d %s", round, code, msg)
		}
		stop.Store(true)
		wg.Wait()
		// The move succeeded, so P was QS2's from then on, and alice may
		// neither replace nor delete it: it must be the admin's plan (a
		// delete of hers before the move leaves the move to create it).
		code, msg := admin.do(t, http.MethodGet, nil)
		if code != http.StatusOK {
			t.Fatalf("round %d: P after the move: %d %s (alice deleted the plan of QS2 that she may not change)", round, code, msg)
		}
		var got qshare.PlanBody
		must(t, json.Unmarshal([]byte(msg), &got))
		if got.QuotaShareName != "QS2" || got.InstanceCount != 3 {
			t.Fatalf("round %d: P after the move is %s × %d: alice replaced the plan of QS2 that she may not change", round, got.QuotaShareName, got.InstanceCount)
		}
	}
	t.Logf("%d rounds: alice's requests %d accepted, %d refused", rounds, aliceOK.Load(), aliceRefused.Load())
	if aliceOK.Load() == 0 || aliceRefused.Load() == 0 {
		t.Errorf("the race never ran both ways (accepted %d, refused %d): the test shows nothing", aliceOK.Load(), aliceRefused.Load())
	}
}

// planClient sends signed requests to one capacity plan's URL.
type planClient struct {
	url string
	hc  *http.Client
}

// do sends method with body (JSON, if not nil) and returns the status and
// the response body.
func (c *planClient) do(t *testing.T, method string, body any) (int, string) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.url, r)
	must(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, fmt.Sprint(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
