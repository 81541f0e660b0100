package bench

import (
	"bytes"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"qshare/internal/serveproc"
)

// TestTrueProgram: the trivial container's program is an ELF executable
// of its architecture with its entry inside its one segment, and on this
// host's architecture it runs and exits 0.
func TestTrueProgram(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		prog, err := trueProgram(arch)
		if err != nil {
			t.Fatal(err)
		}
		f, err := elf.NewFile(bytes.NewReader(prog))
		if err != nil {
			t.Fatalf("%s: not an ELF file: %v", arch, err)
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
		if f.Machine != want || f.Type != elf.ET_EXEC || len(f.Progs) != 1 {
			t.Errorf("%s: machine %v type %v with %d segments", arch, f.Machine, f.Type, len(f.Progs))
		}
		if p := f.Progs[0]; f.Entry < p.Vaddr || f.Entry >= p.Vaddr+p.Filesz || p.Filesz != uint64(len(prog)) {
			t.Errorf("%s: entry %#x outside its segment %+v", arch, f.Entry, p.ProgHeader)
		}
		if arch != runtime.GOARCH || runtime.GOOS != "linux" {
			continue
		}
		bin := filepath.Join(t.TempDir(), "true")
		if err := serveproc.WriteExecutable(bin, prog); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin).CombinedOutput(); err != nil {
			t.Errorf("running the %s program: %v %s", arch, err, out)
		}
	}
	if _, err := trueProgram("riscv64"); err == nil {
		t.Error("a program for an architecture it has no code for")
	}
}
