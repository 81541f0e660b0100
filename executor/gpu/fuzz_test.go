package gpu

import (
	"testing"

	"qshare"
)

// FuzzParseSMI: whatever nvidia-smi prints, parsing returns GPUs with
// distinct, non-empty UUIDs or an EINVALID error, and never panics.
func FuzzParseSMI(f *testing.F) {
	f.Add("index, uuid, name, memory.total [MiB]\n0, GPU-1, NVIDIA H200, 143771 MiB\n")
	f.Add("0, GPU-a\n1, GPU-b, x\n")
	f.Add("index\n\"unterminated\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, out string) {
		gs, err := ParseSMI([]byte(out))
		if err != nil {
			if qshare.ErrorCodeOf(err) != qshare.EINVALID {
				t.Fatalf("error %v is not EINVALID", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, g := range gs {
			if g.UUID == "" || seen[g.UUID] {
				t.Fatalf("GPU list %v has an empty or repeated UUID", gs)
			}
			seen[g.UUID] = true
		}
	})
}

// FuzzParseTable: an instance-type file is either rejected with EINVALID or
// yields counts from 0 to 1024.
func FuzzParseTable(f *testing.F) {
	f.Add("instanceTypes:\n  ml.g5.xlarge: 2\n")
	f.Add("instanceTypes: {a: -1}\n")
	f.Add("- 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		tb, err := ParseTable("f.yaml", []byte(in))
		if err != nil {
			if qshare.ErrorCodeOf(err) != qshare.EINVALID {
				t.Fatalf("error %v is not EINVALID", err)
			}
			return
		}
		for typ, n := range tb {
			if n < 0 || n > 1024 {
				t.Fatalf("%s has %d GPUs", typ, n)
			}
		}
	})
}
