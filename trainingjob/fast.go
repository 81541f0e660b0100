package trainingjob

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// fastParse decodes a payload into a Request as json.Unmarshal would, for
// the payloads that clients send, without reflection and without copying
// strings that have no escapes (they share the payload's memory). It
// reports false for anything it is not sure to decode exactly as
// json.Unmarshal does: a syntax error, a member of the wrong type, null in
// a member qshare reads, a number other than a plain integer, a \u escape,
// invalid UTF-8 in a string qshare reads, a member given twice, a member
// name that differs from one qshare reads only in case (json.Unmarshal
// matches names without regard to case), deep nesting. Parse then decodes
// the payload with encoding/json, so every error message stays its own.
//
// Members qshare does not read are checked to be valid JSON and skipped.
func fastParse(payload string) (*Request, bool) {
	d := decoder{s: payload}
	r := &Request{}
	d.ws()
	if !d.object(requestFields, func(f int) bool {
		switch f {
		case 0:
			return d.str(&r.TrainingJobName)
		case 1:
			return d.algorithm(&r.AlgorithmSpecification)
		case 2:
			return d.str(&r.RoleArn)
		case 3:
			return d.strMap(&r.HyperParameters)
		case 4:
			return d.channels(&r.InputDataConfig)
		case 5:
			r.OutputDataConfig = &OutputDataConfig{}
			return d.object(outputFields, func(int) bool { return d.str(&r.OutputDataConfig.S3OutputPath) })
		case 6:
			return d.resources(&r.ResourceConfig)
		case 7:
			sc := &StoppingCondition{}
			r.StoppingCondition = sc
			return d.object(stoppingFields, func(f int) bool {
				if f == 0 {
					return d.int(&sc.MaxRuntimeInSeconds)
				}
				return d.int(&sc.MaxWaitTimeInSeconds)
			})
		case 8:
			return d.strMap(&r.Environment)
		case 9:
			cc := &CheckpointConfig{}
			r.CheckpointConfig = cc
			return d.object(checkpointFields, func(f int) bool {
				if f == 0 {
					return d.str(&cc.S3Uri)
				}
				return d.str(&cc.LocalPath)
			})
		case 10:
			return d.tags(&r.Tags)
		}
		return false
	}) {
		return nil, false
	}
	d.ws()
	return r, d.i == len(d.s)
}

// The member names of each object, in the order of the switches that read them.
var (
	requestFields    = []string{"TrainingJobName", "AlgorithmSpecification", "RoleArn", "HyperParameters", "InputDataConfig", "OutputDataConfig", "ResourceConfig", "StoppingCondition", "Environment", "CheckpointConfig", "Tags"}
	algorithmFields  = []string{"TrainingImage", "TrainingInputMode", "ContainerEntrypoint", "ContainerArguments"}
	channelFields    = []string{"ChannelName", "DataSource"}
	dataSourceFields = []string{"S3DataSource"}
	s3Fields         = []string{"S3DataType", "S3Uri"}
	outputFields     = []string{"S3OutputPath"}
	resourceFields   = []string{"InstanceType", "InstanceCount", "VolumeSizeInGB", "InstanceGroups"}
	groupFields      = []string{"InstanceGroupName", "InstanceType", "InstanceCount"}
	stoppingFields   = []string{"MaxRuntimeInSeconds", "MaxWaitTimeInSeconds"}
	checkpointFields = []string{"S3Uri", "LocalPath"}
	tagFields        = []string{"Key", "Value"}
)

// maxSkipDepth bounds the nesting of skipped members; deeper ones go to
// encoding/json (which allows 10000 levels).
const maxSkipDepth = 64

type decoder struct {
	s string
	i int
}

func (d *decoder) ws() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next skips space and reports whether c comes next, consuming it if so.
func (d *decoder) next(c byte) bool {
	d.ws()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// object reads an object whose members named in fields are read by member
// (given the name's index, with d at the value); other members are skipped.
func (d *decoder) object(fields []string, member func(int) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	var seen uint32
	for {
		d.ws()
		var key string
		if !d.str(&key) || !d.next(':') {
			return false
		}
		d.ws()
		f := fieldIndex(fields, key)
		switch {
		case f >= 0:
			if seen&(1<<f) != 0 {
				return false // json.Unmarshal merges repeated members; leave it to it
			}
			seen |= 1 << f
			if !member(f) {
				return false
			}
		case foldsToField(fields, key):
			return false
		default:
			if !d.skip(0) {
				return false
			}
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

func fieldIndex(fields []string, key string) int {
	for i, f := range fields {
		if f == key {
			return i
		}
	}
	return -1
}

// foldsToField reports whether json.Unmarshal might match key to one of
// fields without regard to case: when it does so for ASCII, or when key is
// not ASCII (Unicode folding has cases such as the Kelvin sign).
func foldsToField(fields []string, key string) bool {
	for i := 0; i < len(key); i++ {
		if key[i] >= utf8.RuneSelf {
			return true
		}
	}
	for _, f := range fields {
		if strings.EqualFold(f, key) {
			return true
		}
	}
	return false
}

// str reads a string into *v: a slice of the payload when it has no
// escapes. It fails on \u escapes and on invalid UTF-8, which json.Unmarshal
// replaces with U+FFFD.
func (d *decoder) str(v *string) bool {
	if d.i >= len(d.s) || d.s[d.i] != '"' {
		return false
	}
	start := d.i + 1
	for i := start; i < len(d.s); i++ {
		switch c := d.s[i]; {
		case c == '"':
			s := d.s[start:i]
			if !utf8.ValidString(s) {
				return false
			}
			*v, d.i = s, i+1
			return true
		case c == '\\':
			return d.unescape(v, start)
		case c < 0x20:
			return false
		}
	}
	return false
}

// unescape reads a string with escapes that starts at start, after its quote.
func (d *decoder) unescape(v *string, start int) bool {
	var b strings.Builder
	for i := start; i < len(d.s); i++ {
		c := d.s[i]
		switch {
		case c == '"':
			s := b.String()
			if !utf8.ValidString(s) {
				return false
			}
			*v, d.i = s, i+1
			return true
		case c < 0x20:
			return false
		case c != '\\':
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(d.s) {
			return false
		}
		switch d.s[i] {
		case '"', '\\', '/':
			b.WriteByte(d.s[i])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		default: // \u, with its surrogates, and invalid escapes
			return false
		}
	}
	return false
}

// int reads an integer that fits an int64: digits with an optional minus
// sign, no fraction or exponent.
func (d *decoder) int(v *int64) bool {
	start := d.i
	if d.i < len(d.s) && d.s[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	if n == 0 || (n > 1 && d.s[digits] == '0') {
		return false
	}
	if d.i < len(d.s) && (d.s[d.i] == '.' || d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		return false
	}
	x, err := strconv.ParseInt(d.s[start:d.i], 10, 64)
	if err != nil {
		return false
	}
	*v = x
	return true
}

func (d *decoder) intPtr(v **int64) bool {
	var x int64
	if !d.int(&x) {
		return false
	}
	*v = &x
	return true
}

// array reads an array, calling elem with d at each element. An empty
// array is made a non-nil empty slice by the caller, as json.Unmarshal does.
func (d *decoder) array(elem func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		d.ws()
		if !elem() {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next(']')
	}
}

func (d *decoder) strs(v *[]string) bool {
	l := []string{}
	ok := d.array(func() bool {
		var s string
		if !d.str(&s) {
			return false
		}
		l = append(l, s)
		return true
	})
	*v = l
	return ok
}

// strMap reads an object of strings; a name given twice keeps its last value.
func (d *decoder) strMap(v *map[string]string) bool {
	if !d.next('{') {
		return false
	}
	m := map[string]string{}
	*v = m
	if d.next('}') {
		return true
	}
	for {
		d.ws()
		var k, s string
		if !d.str(&k) || !d.next(':') {
			return false
		}
		d.ws()
		if !d.str(&s) {
			return false
		}
		m[k] = s
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

func (d *decoder) algorithm(a *AlgorithmSpecification) bool {
	return d.object(algorithmFields, func(f int) bool {
		switch f {
		case 0:
			return d.str(&a.TrainingImage)
		case 1:
			return d.str(&a.TrainingInputMode)
		case 2:
			return d.strs(&a.ContainerEntrypoint)
		default:
			return d.strs(&a.ContainerArguments)
		}
	})
}

func (d *decoder) channels(v *[]Channel) bool {
	l := []Channel{}
	ok := d.array(func() bool {
		var c Channel
		if !d.object(channelFields, func(f int) bool {
			if f == 0 {
				return d.str(&c.ChannelName)
			}
			return d.object(dataSourceFields, func(int) bool {
				s3 := &S3DataSource{}
				c.DataSource.S3DataSource = s3
				return d.object(s3Fields, func(f int) bool {
					if f == 0 {
						return d.str(&s3.S3DataType)
					}
					return d.str(&s3.S3Uri)
				})
			})
		}) {
			return false
		}
		l = append(l, c)
		return true
	})
	*v = l
	return ok
}

func (d *decoder) resources(rc *ResourceConfig) bool {
	return d.object(resourceFields, func(f int) bool {
		switch f {
		case 0:
			return d.str(&rc.InstanceType)
		case 1:
			return d.intPtr(&rc.InstanceCount)
		case 2:
			return d.int(&rc.VolumeSizeInGB)
		default:
			l := []InstanceGroup{}
			ok := d.array(func() bool {
				var g InstanceGroup
				if !d.object(groupFields, func(f int) bool {
					switch f {
					case 0:
						return d.str(&g.InstanceGroupName)
					case 1:
						return d.str(&g.InstanceType)
					default:
						return d.intPtr(&g.InstanceCount)
					}
				}) {
					return false
				}
				l = append(l, g)
				return true
			})
			rc.InstanceGroups = l
			return ok
		}
	})
}

func (d *decoder) tags(v *[]Tag) bool {
	l := []Tag{}
	ok := d.array(func() bool {
		var t Tag
		if !d.object(tagFields, func(f int) bool {
			if f == 0 {
				return d.str(&t.Key)
			}
			return d.str(&t.Value)
		}) {
			return false
		}
		l = append(l, t)
		return true
	})
	*v = l
	return ok
}

// skip checks and skips a value of any kind, d at its first byte.
func (d *decoder) skip(depth int) bool {
	if d.i >= len(d.s) || depth > maxSkipDepth {
		return false
	}
	switch c := d.s[d.i]; {
	case c == '"':
		return d.skipString()
	case c == '{':
		d.i++
		if d.next('}') {
			return true
		}
		for {
			d.ws()
			if !d.skipString() || !d.next(':') {
				return false
			}
			d.ws()
			if !d.skip(depth + 1) {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next('}')
		}
	case c == '[':
		d.i++
		if d.next(']') {
			return true
		}
		for {
			d.ws()
			if !d.skip(depth + 1) {
				return false
			}
			if d.next(',') {
				continue
			}
			return d.next(']')
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return d.skipNumber()
	case strings.HasPrefix(d.s[d.i:], "true"):
		d.i += 4
	case strings.HasPrefix(d.s[d.i:], "false"):
		d.i += 5
	case strings.HasPrefix(d.s[d.i:], "null"):
		d.i += 4
	default:
		return false
	}
	return true
}

// skipString checks and skips a string: no control characters, valid
// escapes. Invalid UTF-8 is valid JSON to encoding/json.
func (d *decoder) skipString() bool {
	if d.i >= len(d.s) || d.s[d.i] != '"' {
		return false
	}
	for i := d.i + 1; i < len(d.s); i++ {
		switch c := d.s[i]; {
		case c == '"':
			d.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(d.s) {
				return false
			}
			switch d.s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(d.s) {
					return false
				}
				for _, h := range []byte(d.s[i+1 : i+5]) {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// skipNumber checks and skips a number of the JSON grammar.
func (d *decoder) skipNumber() bool {
	s, i := d.s, d.i
	digits := func() bool {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > j
	}
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	d.i = i
	return true
}
