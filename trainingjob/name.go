package trainingjob

import (
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// AttemptNamePrefix starts the name of every training job that qshare
// forms for an attempt, as AWS Batch starts its own ("AWSBatch", in lower
// case: SageMaker compares training job names without case).
const AttemptNamePrefix = "awsbatch"

// attemptIDHex is the length of the job ID's part of an attempt's name: a
// UUID's 32 hex digits.
const attemptIDHex = 32

// AttemptName returns the SageMaker training job name of attempt n (from 1)
// of the job with ID jobID, whose payload (or, without a TrainingJobName in
// it, whose job) is named name:
//
//	"awsbatch" + as much of name as fits + the job ID's 32 hex digits + "-" + n
//
// in lower case. It is at most MaxTrainingJobName characters and a valid
// TrainingJobName, so that the SageMaker SDK's DescribeTrainingJob accepts
// it (AWS Batch's own form, "AWSBatch" + name + 32 random hex digits, was 77
// characters for the notebook's jobs). The name is cut, not the job ID or
// the attempt number: those make it unique per attempt, and let
// ParseAttemptName find the attempt again without an index. A character
// of name that a training job name may not hold ('_', '.') becomes '-'.
//
// A job ID that is not a UUID (only tests make one) gets 32 hex digits of
// its own characters, padded with zeros, and ParseAttemptName then finds no
// job of that ID; callers look such names up another way (LegacyAttemptName).
func AttemptName(name, jobID string, n int) string {
	id := hexOf(jobID)
	if u, err := uuid.Parse(jobID); err == nil {
		id = strings.ReplaceAll(u.String(), "-", "")
	}
	num := strconv.Itoa(n)
	room := MaxTrainingJobName - len(AttemptNamePrefix) - len(id) - 1 - len(num)
	var b strings.Builder
	b.Grow(MaxTrainingJobName)
	b.WriteString(AttemptNamePrefix)
	for i := 0; i < len(name) && room > 0; i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			c += 'a' - 'A'
		case alnum(c) || c == '-':
		default:
			c = '-'
		}
		b.WriteByte(c)
		room--
	}
	b.WriteString(id)
	b.WriteByte('-')
	b.WriteString(num)
	return b.String()
}

// hexOf returns attemptIDHex hex digits made of s's bytes: its first 16,
// padded with zeros. It is only for job IDs that are not UUIDs.
func hexOf(s string) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, attemptIDHex)
	for i := 0; i < len(s) && len(out) < attemptIDHex; i++ {
		out = append(out, digits[s[i]>>4], digits[s[i]&15])
	}
	for len(out) < attemptIDHex {
		out = append(out, '0')
	}
	return string(out)
}

// ParseAttemptName reads a name that AttemptName formed: the ID of its job
// (a UUID in its usual form) and the attempt's number. ok is false for any
// other name, among them the names of attempts made before qshare formed
// them this way ("awsbatch" + name + 32 random hex digits, which the store
// still holds for old jobs). Names are compared without case, as SageMaker
// compares them.
func ParseAttemptName(name string) (jobID string, n int, ok bool) {
	name = strings.ToLower(name)
	if len(name) > MaxTrainingJobName || !strings.HasPrefix(name, AttemptNamePrefix) {
		return "", 0, false
	}
	rest, num, found := cutLast(name, '-')
	if !found || len(num) == 0 || len(num) > 10 || num[0] == '0' {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || len(rest) < len(AttemptNamePrefix)+attemptIDHex {
		return "", 0, false
	}
	hex := rest[len(rest)-attemptIDHex:]
	u, err := uuid.Parse(hex) // 32 characters: only the form without hyphens
	if err != nil {
		return "", 0, false
	}
	return u.String(), n, true
}

// LegacyAttemptName reports whether name has the form of the training job
// names that qshare gave attempts before AttemptName: "awsbatch" + a name
// + 32 hex digits, with no attempt number. Those are found by looking at
// every job's attempts.
func LegacyAttemptName(name string) bool {
	name = strings.ToLower(name)
	if !strings.HasPrefix(name, AttemptNamePrefix) || len(name) < len(AttemptNamePrefix)+attemptIDHex {
		return false
	}
	for _, c := range []byte(name[len(name)-attemptIDHex:]) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func cutLast(s string, sep byte) (before, after string, found bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// AttemptARN returns the ARN of the training job named name in region and
// account: what an attempt reports as its serviceResourceId.
func AttemptARN(region, account, name string) string {
	return "arn:aws:sagemaker:" + region + ":" + account + ":training-job/" + name
}

// NameOfARN returns the training job name of a training job ARN (anything
// after "training-job/"), or "" when arn is not one.
func NameOfARN(arn string) string {
	i := strings.Index(arn, ":training-job/")
	if !strings.HasPrefix(arn, "arn:") || i < 0 {
		return ""
	}
	return arn[i+len(":training-job/"):]
}
