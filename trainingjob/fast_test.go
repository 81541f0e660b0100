package trainingjob

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"qshare"
)

// parseStd is Parse as it was before fastParse: encoding/json alone. Parse
// must answer every payload as it does.
func parseStd(payload string) (*Request, error) {
	if strings.TrimSpace(payload) == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload is required: give a SageMaker CreateTrainingJob request as JSON")
	}
	var r Request
	dec := json.NewDecoder(bytes.NewReader([]byte(payload)))
	if err := dec.Decode(&r); err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload is not a valid CreateTrainingJob request: %s", describeJSONError(err))
	}
	if dec.More() {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload has data after the JSON object: give exactly one object")
	}
	return &r, nil
}

// checkSame fails unless Parse answers payload as parseStd does, and
// unless fastParse, when it decodes payload, decodes it as json.Unmarshal.
func checkSame(t *testing.T, payload string) {
	t.Helper()
	got, gerr := Parse(payload)
	want, werr := parseStd(payload)
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
		t.Fatalf("Parse(%q) error = %v; encoding/json's is %v", payload, gerr, werr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse(%q) = %+v; encoding/json's is %+v", payload, got, want)
	}
	if r, ok := fastParse(payload); ok {
		var u Request
		if err := json.Unmarshal([]byte(payload), &u); err != nil {
			t.Fatalf("fastParse accepted %q, which json.Unmarshal refuses: %v", payload, err)
		}
		if !reflect.DeepEqual(*r, u) {
			t.Fatalf("fastParse(%q) = %+v; json.Unmarshal gives %+v", payload, *r, u)
		}
	}
}

// The payloads of the fuzz corpus, and the benchmark's.
func TestParseMatchesEncodingJSONOnCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzParse/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fuzz corpus: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// go test fuzz v1, then string("...")
		lines := strings.SplitN(string(b), "\n", 2)
		if len(lines) < 2 {
			continue
		}
		arg := strings.TrimSpace(lines[1])
		if !strings.HasPrefix(arg, "string(") {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(arg, "string("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		checkSame(t, s)
	}
	for _, p := range benchPayloads {
		checkSame(t, p)
		if _, ok := fastParse(p); !ok {
			t.Errorf("fastParse gives up on %q", p)
		}
	}
}

// Random payloads of the CreateTrainingJob shape, with what makes decoding
// hard: names in other cases, repeated members, null, escapes, invalid
// UTF-8, numbers of every form, unknown members, stray bytes.
func TestParseMatchesEncodingJSONOnRandomPayloads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	for range n {
		p := randomPayload(rng)
		checkSame(t, p)
		// and broken: a byte dropped, changed or cut off
		if len(p) > 0 {
			i := rng.IntN(len(p))
			checkSame(t, p[:i]+p[i+1:])
			checkSame(t, p[:i]+string(rune(" {}[],:\"\\0-eE.nx\u00e9\x80"[rng.IntN(18)]))+p[i+1:])
			checkSame(t, p[:i])
		}
	}
}

var randomNames = [][]string{
	requestFields, algorithmFields, channelFields, dataSourceFields, s3Fields, outputFields,
	resourceFields, groupFields, stoppingFields, checkpointFields, tagFields,
	{"Unknown", "HyperParameter", "trainingjobname", "resourceconfig", "INSTANCETYPE", "instanceCount", "\u212aey", "S3\u017fri", "a\\\"b", "\\u0041"},
}

func randomPayload(rng *rand.Rand) string {
	var b strings.Builder
	randomValue(rng, &b, 0, true)
	if rng.IntN(20) == 0 {
		b.WriteString([]string{" ", "\n", " {}", "x", "\t\r\n"}[rng.IntN(5)])
	}
	return b.String()
}

func randomValue(rng *rand.Rand, b *strings.Builder, depth int, object bool) {
	if object || (depth < 5 && rng.IntN(3) == 0) {
		b.WriteByte('{')
		for i := range rng.IntN(6) {
			if i > 0 {
				b.WriteByte(',')
			}
			names := randomNames[rng.IntN(len(randomNames))]
			if depth == 0 && rng.IntN(2) == 0 {
				names = requestFields
			}
			b.WriteByte('"')
			b.WriteString(names[rng.IntN(len(names))])
			b.WriteString(`":`)
			if rng.IntN(4) == 0 {
				b.WriteByte(' ')
			}
			randomValue(rng, b, depth+1, false)
		}
		b.WriteByte('}')
		return
	}
	switch rng.IntN(9) {
	case 0:
		if depth < 5 {
			b.WriteByte('[')
			for i := range rng.IntN(4) {
				if i > 0 {
					b.WriteString(", ")
				}
				randomValue(rng, b, depth+1, rng.IntN(2) == 0)
			}
			b.WriteByte(']')
			return
		}
		b.WriteString("[]")
	case 1, 2, 3:
		b.WriteString([]string{`"ml.g5.xlarge"`, `""`, `"a\"b\\c\/d\n\t"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, "\"\xff\xfe\"", "\"caf\u00e9\"", `"5s"`, `"x\u0000"`, `"\x"`}[rng.IntN(10)])
	case 4, 5:
		b.WriteString([]string{"0", "1", "-1", "2", "01", "1.0", "1e3", "-0", "9223372036854775807", "9223372036854775808", "1e400", "-", "0.5", "2E+1"}[rng.IntN(14)])
	case 6:
		b.WriteString([]string{"null", "true", "false", "nul", "tru"}[rng.IntN(5)])
	default:
		b.WriteString(`{"QSHARE_SIM_DURATION":"1ms","K":"v","K":"w"}`)
	}
}
