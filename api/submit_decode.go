package api

import (
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// decodeSubmitFast decodes the common shape of a SubmitServiceJob body by
// hand: one flat object whose members are the request's string members
// (exactly as the SDKs spell them) and schedulingPriority, with plain
// integers and strings whose escapes are the two-character ones. It reports
// false for anything else (another member, nested objects, null, \u
// escapes, invalid UTF-8, a malformed body), and the caller then decodes the
// body with encoding/json, which is the reference: for every body it
// accepts, decodeSubmitFast fills in exactly what json.Unmarshal would
// (FuzzDecodeSubmit checks it). A submit is the request a server receives
// most, and encoding/json's reflection was about a twentieth of the
// server's CPU per submit.
func decodeSubmitFast(body []byte, in *submitIn) bool {
	var out submitIn
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return false
	}
	i = skipSpace(body, i+1)
	if i < len(body) && body[i] == '}' {
		i++
	} else {
		for {
			key, j, ok := scanString(body, i)
			if !ok {
				return false
			}
			j = skipSpace(body, j)
			if j >= len(body) || body[j] != ':' {
				return false
			}
			j = skipSpace(body, j+1)
			if key == "schedulingPriority" {
				n, k, ok := scanInt32(body, j)
				if !ok {
					return false
				}
				out.SchedulingPriority = &n
				j = k
			} else {
				var dst *string
				switch key {
				case "jobName":
					dst = &out.JobName
				case "jobQueue":
					dst = &out.JobQueue
				case "serviceRequestPayload":
					dst = &out.ServiceRequestPayload
				case "serviceJobType":
					dst = &out.ServiceJobType
				case "shareIdentifier":
					dst = &out.ShareIdentifier
				case "quotaShareName":
					dst = &out.QuotaShareName
				case "clientToken":
					dst = &out.ClientToken
				default:
					return false
				}
				v, k, ok := scanString(body, j)
				if !ok {
					return false
				}
				*dst = v
				j = k
			}
			i = skipSpace(body, j)
			if i >= len(body) {
				return false
			}
			if body[i] == '}' {
				i++
				break
			}
			if body[i] != ',' {
				return false
			}
			i = skipSpace(body, i+1)
		}
	}
	if skipSpace(body, i) != len(body) {
		return false
	}
	*in = out
	return true
}

// skipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString decodes the JSON string that starts at b[i] and returns it and
// the index after it. It fails on \u escapes, control characters and
// invalid UTF-8, which encoding/json handles.
func scanString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	i++
	start := i
	// Without escapes the string is a slice of the body, copied once.
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s := b[start:i]
			if !utf8.Valid(s) {
				return "", i, false
			}
			return string(s), i + 1, true
		case c == '\\':
			return scanEscaped(b, start, i)
		case c < 0x20:
			return "", i, false
		}
		i++
	}
	return "", i, false
}

// scanEscaped finishes scanString for a string with escapes: b[start:i] is
// plain, and b[i] is the first backslash.
func scanEscaped(b []byte, start, i int) (string, int, bool) {
	out := make([]byte, 0, len(b)-start)
	out = append(out, b[start:i]...)
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", i, false
			}
			// out is this function's own buffer: the string takes it over.
			return unsafe.String(unsafe.SliceData(out), len(out)), i + 1, true
		case c == '\\':
			if i+1 >= len(b) {
				return "", i, false
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'n':
				out = append(out, '\n')
			case 't':
				out = append(out, '\t')
			case 'r':
				out = append(out, '\r')
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			default:
				return "", i, false
			}
			i += 2
			continue
		case c < 0x20:
			return "", i, false
		}
		out = append(out, c)
		i++
	}
	return "", i, false
}

// scanInt32 decodes a JSON integer (no fraction, no exponent) that fits in
// an int32 and returns it and the index after it.
func scanInt32(b []byte, i int) (int32, int, bool) {
	start := i
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := i
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	if i == digits || (b[digits] == '0' && i-digits > 1) {
		return 0, i, false // no digits, or a leading zero
	}
	if i < len(b) && (b[i] == '.' || b[i] == 'e' || b[i] == 'E') {
		return 0, i, false
	}
	n, err := strconv.ParseInt(string(b[start:i]), 10, 32)
	if err != nil {
		return 0, i, false
	}
	return int32(n), i, true
}
