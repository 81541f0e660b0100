package process

import (
	"testing"

	"qshare"
	"qshare/trainingjob"
)

// TestValidateRequestIsValidate checks that validating a parsed payload
// answers exactly as validating its text does (the daemon relies on it to
// parse each submit's payload once).
func TestValidateRequestIsValidate(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	for name, p := range map[string]string{
		"valid":         payloadOf("true", nil),
		"no entrypoint": payloadOf([]string{}, nil),
		"bad grace": payloadOf("true", func(m map[string]any) {
			m["Environment"] = map[string]string{EnvStopGrace: "soon"}
		}),
	} {
		req, err := trainingjob.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		demand := qshare.Capacity{"ml.m5.large": 1}
		want, got := e.Validate(p, demand), e.ValidateRequest(req, demand)
		if (want == nil) != (got == nil) || (want != nil && want.Error() != got.Error()) {
			t.Errorf("%s: ValidateRequest = %v, Validate = %v", name, got, want)
		}
		if name != "valid" && want == nil {
			t.Errorf("%s: Validate accepted it", name)
		}
	}
}
