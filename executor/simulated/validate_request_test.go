package simulated

import (
	"testing"

	"qshare/trainingjob"
)

// TestValidateRequestIsValidate checks that validating a parsed payload
// answers exactly as validating its text does (the daemon relies on it to
// parse each submit's payload once).
func TestValidateRequestIsValidate(t *testing.T) {
	e := New(Options{})
	for _, env := range []map[string]string{
		nil,
		{EnvDuration: "90s", EnvExitCode: "3", EnvOnStop: "checkpoint", EnvStopDelay: "1s", EnvStopGrace: "5"},
		{EnvDuration: "ten seconds"},
		{EnvExitCode: "256"},
		{EnvOnStop: "explode"},
		{EnvStopDelay: "soon"},
		{EnvStopGrace: "-3"},
	} {
		p := payload(env)
		req, err := trainingjob.Parse(p)
		if err != nil {
			t.Fatal(err)
		}
		want, got := e.Validate(p, nil), e.ValidateRequest(req, nil)
		if (want == nil) != (got == nil) || (want != nil && want.Error() != got.Error()) {
			t.Errorf("env %v: ValidateRequest = %v, Validate = %v", env, got, want)
		}
	}
}
