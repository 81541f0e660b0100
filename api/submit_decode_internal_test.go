package api

import (
	"encoding/json"
	"reflect"
	"testing"
)

// submitBodies are SubmitServiceJob bodies of every shape: what the SDKs
// send, and what decodeSubmitFast must leave to encoding/json.
var submitBodies = []string{
	`{"clientToken":"4b8b3c6e-0b9a-4b8e-9d7e-3f1c2a5b6d7e","jobName":"j","jobQueue":"q","quotaShareName":"A","serviceJobType":"SAGEMAKER_TRAINING","serviceRequestPayload":"{\"TrainingJobName\":\"train\",\"ResourceConfig\":{\"InstanceType\":\"ml.g5.xlarge\",\"InstanceCount\":1}}"}`,
	`{"jobName":"j","jobQueue":"q","schedulingPriority":7,"serviceJobType":"SAGEMAKER_TRAINING","serviceRequestPayload":"{}"}`,
	` { "jobName" : "a\"b\\c\/d\n\t\r\b\f" , "schedulingPriority" : -0 } `,
	`{}`, ``, ` `, `{"jobName":"é ✓"}`, `{"jobName":"\u00e9"}`, `{"JobName":"x"}`, `{"jobName":null}`,
	`{"jobName":"x","jobName":"y"}`, `{"schedulingPriority":1,"schedulingPriority":2}`,
	`{"schedulingPriority":2147483647}`, `{"schedulingPriority":2147483648}`, `{"schedulingPriority":-2147483649}`,
	`{"schedulingPriority":01}`, `{"schedulingPriority":1.0}`, `{"schedulingPriority":1e2}`, `{"schedulingPriority":"1"}`,
	`{"schedulingPriority":-}`, `{"jobName":"x",}`, `{"jobName":"x"} {}`, `{"jobName":"x"}x`, `[]`, `"x"`, `{"jobName":1}`,
	`{"jobName":"a` + "\x01" + `"}`, `{"jobName":"a` + "\xff" + `"}`, `{"jobName":"a\x"}`, `{"jobName":"a`, `{"jobName"`,
	`{"tags":{"a":"b"},"jobName":"x"}`, `{"retryStrategy":{"attempts":2}}`, `{"timeoutConfig":null}`, `{"unknown":"x","jobName":"y"}`,
	`{"jobName":"x"}` + "\n",
}

// FuzzDecodeSubmit checks decodeSubmitFast against encoding/json: whenever
// it takes a body, json.Unmarshal takes it too and decodes the same request.
func FuzzDecodeSubmit(f *testing.F) {
	for _, b := range submitBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast submitIn
		if !decodeSubmitFast(body, &fast) {
			return
		}
		var ref submitIn
		if err := json.Unmarshal(body, &ref); err != nil {
			t.Fatalf("decodeSubmitFast took %q, which encoding/json refuses: %v", body, err)
		}
		if !reflect.DeepEqual(fast, ref) {
			t.Fatalf("body %q:\nfast %+v\njson %+v", body, fast, ref)
		}
	})
}

// TestDecodeSubmitFastTakesSDKBodies makes sure the fast path is the one
// taken for the bodies SDKs send, so that it does not silently stop paying.
func TestDecodeSubmitFastTakesSDKBodies(t *testing.T) {
	for _, b := range submitBodies[:3] {
		var in submitIn
		if !decodeSubmitFast([]byte(b), &in) {
			t.Errorf("the fast path refused %s", b)
		}
	}
}

func BenchmarkDecodeSubmit(b *testing.B) {
	body := []byte(submitBodies[0])
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var in submitIn
			if err := decode(body, &in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var in submitIn
			if !decodeSubmitFast(body, &in) {
				b.Fatal("refused")
			}
		}
	})
}
