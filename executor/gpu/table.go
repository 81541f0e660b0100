package gpu

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"qshare"
)

// Table maps an instance type to the number of GPUs one instance of it has.
// A type it does not name has none.
type Table map[string]int

// builtin is the GPU count of the common SageMaker training instance types.
// Types of families without NVIDIA GPUs (ml.m5, ml.c5, ml.r5, ml.t3, ml.trn1
// with its Trainium chips, …) are left out: they get 0.
var builtin = func() Table {
	t := Table{
		"ml.p2.xlarge": 1, "ml.p2.8xlarge": 8, "ml.p2.16xlarge": 16,
		"ml.p3.2xlarge": 1, "ml.p3.8xlarge": 4, "ml.p3.16xlarge": 8, "ml.p3dn.24xlarge": 8,
		"ml.p4d.24xlarge": 8, "ml.p4de.24xlarge": 8,
		"ml.p5.48xlarge": 8, "ml.p5e.48xlarge": 8, "ml.p5en.48xlarge": 8,
		"ml.p6-b200.48xlarge": 8,
		"ml.g4dn.12xlarge":    4,
	}
	for _, s := range []string{"xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"} {
		t["ml.g4dn."+s] = 1
	}
	// g5, g6 and g6e share one shape: 1 GPU up to 16xlarge, 4 at 12xlarge and 24xlarge, 8 at 48xlarge.
	for _, f := range []string{"g5", "g6", "g6e"} {
		for _, s := range []string{"xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"} {
			t["ml."+f+"."+s] = 1
		}
		t["ml."+f+".12xlarge"] = 4
		t["ml."+f+".24xlarge"] = 4
		t["ml."+f+".48xlarge"] = 8
	}
	return t
}()

// Builtin returns a copy of the built-in table.
func Builtin() Table {
	t := make(Table, len(builtin))
	for k, v := range builtin {
		t[k] = v
	}
	return t
}

// PerInstance returns the GPUs of one instance of typ (0 for a type the table
// does not name).
func (t Table) PerInstance(typ string) int { return t[typ] }

// Need returns the GPUs a demand needs: the sum over its types of the count
// times the GPUs per instance.
func (t Table) Need(d qshare.Capacity) int64 {
	var n int64
	for typ, c := range d {
		n += c * int64(t[typ])
	}
	return n
}

// Types returns the table's types, sorted.
func (t Table) Types() []string {
	ts := make([]string, 0, len(t))
	for k := range t {
		ts = append(ts, k)
	}
	sort.Strings(ts)
	return ts
}

// File is the format of the instance-type file, in YAML:
//
//	# GPUs per instance; overrides and adds to the built-in table.
//	instanceTypes:
//	  ml.g5.xlarge: 1
//	  my.dgx: 8
//	  ml.p3.2xlarge: 0   # 0 takes the GPUs away from a built-in type
type File struct {
	InstanceTypes map[string]int `yaml:"instanceTypes"`
}

// LoadTable returns the built-in table with the types of the file at path
// set over it. An empty path returns the built-in table.
func LoadTable(path string) (Table, error) {
	t := Builtin()
	if path == "" {
		return t, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "cannot read the instance-type file: %v", err)
	}
	return t, mergeYAML(t, path, b)
}

// ParseTable is LoadTable for a file's contents; name is used in messages.
func ParseTable(name string, b []byte) (Table, error) {
	t := Builtin()
	return t, mergeYAML(t, name, b)
}

func mergeYAML(t Table, name string, b []byte) error {
	var f File
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return qshare.Errorf(qshare.EINVALID, "instance-type file %s: %v: write it as `instanceTypes:` followed by lines `  ml.g5.xlarge: 1`", name, err)
	}
	for typ, n := range f.InstanceTypes {
		if strings.TrimSpace(typ) == "" {
			return qshare.Errorf(qshare.EINVALID, "instance-type file %s: an instance type name is empty", name)
		}
		if n < 0 || n > 1024 {
			return qshare.Errorf(qshare.EINVALID, "instance-type file %s: %s has %d GPUs: give a number from 0 to 1024", name, typ, n)
		}
		t[typ] = n
	}
	return nil
}

// Describe renders a demand's GPU need for messages: "2×ml.g5.12xlarge (4 GPUs each)".
func (t Table) Describe(d qshare.Capacity) string {
	var parts []string
	for _, typ := range d.Types() {
		parts = append(parts, fmt.Sprintf("%d×%s (%d GPUs each)", d[typ], typ, t[typ]))
	}
	return strings.Join(parts, " + ")
}
