package trainingjob

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"qshare"
)

// The limits of CreateTrainingJob that Validate enforces, as SageMaker's
// API reference states them.
const (
	MaxTrainingJobName     = 63   // characters of TrainingJobName
	MaxEnvironment         = 100  // entries of Environment
	MaxEnvironmentKey      = 512  // characters of an Environment key
	MaxEnvironmentValue    = 512  // characters of an Environment value
	MaxHyperParameters     = 100  // entries of HyperParameters
	MaxHyperParameterKey   = 256  // characters of a HyperParameters key
	MaxHyperParameterValue = 2500 // characters of a HyperParameters value
	MaxCheckpointLocalPath = 4096 // characters of CheckpointConfig.LocalPath
	MaxChannelName         = 64   // characters of a channel name
)

// ReservedPrefix starts the names of the environment variables that
// qshare's executors set for a job (QSHARE_JOB_ID, QSHARE_ATTEMPT, …) and
// read from the server's own environment (QSHARE_SUPERVISE, which turns
// the qshare binary into a supervisor). A payload's Environment may not
// set them, except the controls below.
const ReservedPrefix = "QSHARE_"

// payloadControls are the QSHARE_ variables a payload's Environment is
// documented to set: the job's own stop grace period, and the simulated
// executor's plan of a job. They ask the executor for something; none of
// them is an identity, a secret or a mode of the qshare binary.
var payloadControls = map[string]bool{
	"QSHARE_STOP_GRACE":     true,
	"QSHARE_SIM_DURATION":   true,
	"QSHARE_SIM_EXIT_CODE":  true,
	"QSHARE_SIM_ON_STOP":    true,
	"QSHARE_SIM_STOP_DELAY": true,
}

// PayloadControl reports whether name is one of the QSHARE_ variables that
// a payload's Environment may set (QSHARE_STOP_GRACE and the simulated
// executor's QSHARE_SIM_DURATION, QSHARE_SIM_EXIT_CODE, QSHARE_SIM_ON_STOP
// and QSHARE_SIM_STOP_DELAY). Every other name that starts with
// ReservedPrefix is refused at submit.
func PayloadControl(name string) bool { return payloadControls[name] }

// The patterns of SageMaker's API reference, checked byte by byte: a
// regexp of TrainingJobName's pattern took about as long as decoding the
// whole payload. TestPatterns checks each function against its pattern.
//
//	TrainingJobName   ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$
//	Environment key   ^[a-zA-Z_][a-zA-Z0-9_]*$
//	ChannelName       ^[A-Za-z0-9\.\-_]+$

// ValidTrainingJobName reports whether name is a TrainingJobName SageMaker
// accepts: 1 to 63 letters, digits and hyphens, starting and ending with a
// letter or digit.
func ValidTrainingJobName(name string) bool {
	if len(name) == 0 || len(name) > MaxTrainingJobName || !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return false
	}
	for i := 1; i < len(name)-1; i++ {
		if c := name[i]; !alnum(c) && c != '-' {
			return false
		}
	}
	return true
}

func validEnvKey(k string) bool {
	if len(k) == 0 || !(letter(k[0]) || k[0] == '_') {
		return false
	}
	for i := 1; i < len(k); i++ {
		if c := k[i]; !alnum(c) && c != '_' {
			return false
		}
	}
	return true
}

func validChannelName(n string) bool {
	if len(n) == 0 {
		return false
	}
	for i := 0; i < len(n); i++ {
		if c := n[i]; !alnum(c) && c != '.' && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

func letter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func alnum(c byte) bool  { return letter(c) || c >= '0' && c <= '9' }

// Validate checks what SageMaker's CreateTrainingJob checks of the members
// qshare reads, and that the Environment sets none of qshare's own
// variables. It fails with a *qshare.Error (EINVALID) whose message names
// the member, quotes at most a short prefix of the offending value, and
// holds nothing of the server's (no path, no configuration). Parse calls
// it, so every caller of Parse (the daemon at submit, an executor's
// Validate) refuses the same payloads; ParseAccepted, for jobs already
// queued, holds them to the QSHARE_ rule alone.
func (r *Request) Validate() error {
	if n := r.TrainingJobName; n != "" && !ValidTrainingJobName(n) {
		if l := utf8.RuneCountInString(n); l > MaxTrainingJobName {
			return invalid("TrainingJobName is %d characters long: use 1 to %d letters, digits and hyphens", l, MaxTrainingJobName)
		}
		return invalid("TrainingJobName %s is not valid: use 1 to %d letters, digits and hyphens, starting and ending with a letter or digit", quote(n), MaxTrainingJobName)
	}
	if err := validateEnvironment(r.Environment); err != nil {
		return err
	}
	if err := validateHyperParameters(r.HyperParameters); err != nil {
		return err
	}
	if sc := r.StoppingCondition; sc != nil && sc.MaxRuntimeInSeconds != nil && *sc.MaxRuntimeInSeconds < 1 {
		return invalid("StoppingCondition.MaxRuntimeInSeconds is %d: give 1 or more seconds, or leave it out for no limit", *sc.MaxRuntimeInSeconds)
	}
	if cc := r.CheckpointConfig; cc != nil && cc.LocalPath != "" {
		p := cc.LocalPath
		switch l := utf8.RuneCountInString(p); {
		case l > MaxCheckpointLocalPath:
			return invalid("CheckpointConfig.LocalPath is %d characters long: at most %d are allowed", l, MaxCheckpointLocalPath)
		case strings.IndexByte(p, 0) >= 0:
			return invalid("CheckpointConfig.LocalPath holds a NUL byte: give an absolute path such as /opt/ml/checkpoints")
		case !strings.HasPrefix(p, "/"):
			return invalid("CheckpointConfig.LocalPath %s is not absolute: give an absolute path such as /opt/ml/checkpoints", quote(p))
		}
	}
	for i, c := range r.InputDataConfig {
		if l := utf8.RuneCountInString(c.ChannelName); l > MaxChannelName {
			return invalid("InputDataConfig[%d].ChannelName is %d characters long: at most %d are allowed", i, l, MaxChannelName)
		}
		if !validChannelName(c.ChannelName) {
			return invalid("InputDataConfig[%d].ChannelName %s is not valid: use 1 to %d letters, digits, '.', '-' and '_'", i, quote(c.ChannelName), MaxChannelName)
		}
	}
	return nil
}

func validateEnvironment(env map[string]string) error {
	return validateMap("Environment", env, MaxEnvironment, MaxEnvironmentKey, func(k, v string) error {
		if !validEnvKey(k) {
			return invalid("Environment key %s is not valid: use a letter or '_', then letters, digits and '_'", quote(k))
		}
		if err := reservedVariable(k, v); err != nil {
			return err
		}
		if l := utf8.RuneCountInString(v); l > MaxEnvironmentValue {
			return invalid("Environment.%s is %d characters long: at most %d are allowed", keyName(k), l, MaxEnvironmentValue)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return invalid("Environment.%s holds a NUL byte, which a process environment cannot carry", keyName(k))
		}
		return nil
	})
}

func validateHyperParameters(hp map[string]string) error {
	return validateMap("HyperParameters", hp, MaxHyperParameters, MaxHyperParameterKey, func(k, v string) error {
		if l := utf8.RuneCountInString(v); l > MaxHyperParameterValue {
			return invalid("HyperParameters.%s is %d characters long: at most %d are allowed", quote(k), l, MaxHyperParameterValue)
		}
		return nil
	})
}

// validateMap checks that the map member has at most maxEntries entries
// and keys of at most maxKey characters, then each entry with entry (in
// firstBad's order).
func validateMap(member string, m map[string]string, maxEntries, maxKey int, entry func(k, v string) error) error {
	if len(m) > maxEntries {
		return invalid("%s has %d entries: at most %d are allowed", member, len(m), maxEntries)
	}
	return firstBad(m, func(k, v string) error {
		if l := utf8.RuneCountInString(k); l > maxKey {
			return invalid("%s has a key of %d characters: at most %d are allowed", member, l, maxKey)
		}
		return entry(k, v)
	})
}

// reservedVariable refuses an Environment entry that sets one of qshare's
// own variables.
func reservedVariable(k, _ string) error {
	if !strings.HasPrefix(k, ReservedPrefix) || payloadControls[k] {
		return nil
	}
	return invalid("Environment.%s is not allowed: variables starting with %s are qshare's own (a payload may set only QSHARE_STOP_GRACE and QSHARE_SIM_*)", keyName(k), ReservedPrefix)
}

// keyName is an Environment key for a message: as it is when it is a
// valid name of at most 64 bytes, quoted (and cut) otherwise.
func keyName(k string) string {
	if validEnvKey(k) && len(k) <= 64 {
		return k
	}
	return quote(k)
}

// firstBad checks every entry of m and returns the error of the smallest
// key that fails, so that a payload gets the same answer every time (map
// order is random) without sorting the keys of every payload.
func firstBad(m map[string]string, check func(k, v string) error) error {
	var bad string
	var err error
	for k, v := range m {
		if e := check(k, v); e != nil && (err == nil || k < bad) {
			bad, err = k, e
		}
	}
	return err
}

func invalid(format string, args ...any) error {
	return qshare.Errorf(qshare.EINVALID, "serviceRequestPayload "+format, args...)
}

// quote quotes a value of the payload for a message: Go syntax, so that
// control bytes show, and cut to its first 64 bytes, so that a long value
// does not fill the message.
func quote(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q…", s[:cut])
}
