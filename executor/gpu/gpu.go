// Package gpu finds the host's NVIDIA GPUs, knows how many GPUs each
// instance type stands for, and hands GPUs to attempts so that no GPU is ever
// given to two live attempts at once. The process executor uses it at start
// (Discover, LoadTable), at each attempt's start (Allocator.Claim), when the
// attempt's processes are gone (Allocator.Release), and after a restart
// (Allocator.Reclaim from the attempt's recorded state).
package gpu

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"qshare"
)

// GPU is one device of the host.
type GPU struct {
	// Index is the device's nvidia-smi index (or its position in a
	// user-given list).
	Index int `json:"index"`
	// UUID identifies the device for CUDA_VISIBLE_DEVICES: a "GPU-…" UUID
	// from nvidia-smi, or the identifier the user gave.
	UUID string `json:"uuid"`
	// Name is the model ("NVIDIA H200"), when known.
	Name string `json:"name,omitempty"`
	// MemoryMiB is the device's total memory, when known.
	MemoryMiB int64 `json:"memoryMiB,omitempty"`
}

// SMICommand is the program Discover runs. It is looked up on PATH, so a test
// can put a fake one there.
const SMICommand = "nvidia-smi"

// smiArgs are the arguments of the nvidia-smi query.
var smiArgs = []string{"--query-gpu=index,uuid,name,memory.total", "--format=csv"}

// Discover returns the host's GPUs.
//
// With a non-empty given list (the --gpus flag), only those GPUs are used:
// each entry is an nvidia-smi index ("0") or UUID ("GPU-…"); when nvidia-smi
// is on PATH every entry must name one of the GPUs it reports, and when it is
// not the entries are taken as they are (index = position). The single
// entry "none" means no GPUs. With no list, Discover asks nvidia-smi, and a
// host without it has no GPUs. A failing nvidia-smi is an error: on a GPU
// host, running jobs without their GPUs would be worse than not starting.
func Discover(ctx context.Context, given []string) ([]GPU, error) {
	given = trimList(given)
	if len(given) == 1 && strings.EqualFold(given[0], "none") {
		return nil, nil
	}
	var found []GPU
	smi, lookErr := exec.LookPath(SMICommand)
	if lookErr == nil {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, smi, smiArgs...)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "%s %s failed: %v %s: fix the NVIDIA driver, or give the GPUs to use with --gpus (or --gpus none)", SMICommand, strings.Join(smiArgs, " "), err, strings.TrimSpace(stderr.String()))
		}
		found, err = ParseSMI(out)
		if err != nil {
			return nil, err
		}
	}
	if len(given) == 0 {
		return found, nil
	}
	seen := map[string]bool{}
	var out []GPU
	for i, g := range given {
		if seen[g] {
			return nil, qshare.Errorf(qshare.EINVALID, "GPU %q is listed twice in --gpus: list each GPU once", g)
		}
		seen[g] = true
		if lookErr != nil {
			out = append(out, GPU{Index: i, UUID: g})
			continue
		}
		var match *GPU
		for k := range found {
			if found[k].UUID == g || strconv.Itoa(found[k].Index) == g {
				match = &found[k]
				break
			}
		}
		if match == nil {
			return nil, qshare.Errorf(qshare.EINVALID, "GPU %q in --gpus is not one of the %d GPUs nvidia-smi reports (%s): give indices or UUIDs it lists", g, len(found), describe(found))
		}
		for _, o := range out {
			if o.UUID == match.UUID {
				return nil, qshare.Errorf(qshare.EINVALID, "--gpus names GPU %d (%s) twice: list each GPU once", match.Index, match.UUID)
			}
		}
		out = append(out, *match)
	}
	return out, nil
}

// ParseList splits a --gpus value ("0,1,GPU-ab12…") into entries for Discover.
func ParseList(s string) []string { return trimList(strings.Split(s, ",")) }

func trimList(in []string) []string {
	var out []string
	for _, s := range in {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func describe(gs []GPU) string {
	var parts []string
	for _, g := range gs {
		parts = append(parts, fmt.Sprintf("%d=%s", g.Index, g.UUID))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// ParseSMI reads the CSV that `nvidia-smi --query-gpu=index,uuid,name,memory.total
// --format=csv` prints: a header line, then one line per GPU such as
// "0, GPU-5c1e…, NVIDIA H200, 143771 MiB".
func ParseSMI(out []byte) ([]GPU, error) {
	r := csv.NewReader(bytes.NewReader(out))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "cannot read the output of %s: %v", SMICommand, err)
	}
	var gs []GPU
	for i, rec := range recs {
		if i == 0 && len(rec) > 0 && strings.HasPrefix(strings.TrimSpace(rec[0]), "index") {
			continue // the header
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) < 2 {
			return nil, qshare.Errorf(qshare.EINVALID, "cannot read line %d of the output of %s: %q has no UUID", i+1, SMICommand, strings.Join(rec, ","))
		}
		idx, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "cannot read line %d of the output of %s: index %q is not a number", i+1, SMICommand, rec[0])
		}
		g := GPU{Index: idx, UUID: strings.TrimSpace(rec[1])}
		if len(rec) > 2 {
			g.Name = strings.TrimSpace(rec[2])
		}
		if len(rec) > 3 {
			f := strings.Fields(rec[3])
			if len(f) > 0 {
				g.MemoryMiB, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
		if g.UUID == "" {
			return nil, qshare.Errorf(qshare.EINVALID, "cannot read line %d of the output of %s: empty UUID", i+1, SMICommand)
		}
		for _, o := range gs {
			if o.UUID == g.UUID {
				return nil, qshare.Errorf(qshare.EINVALID, "%s reports GPU %s twice", SMICommand, g.UUID)
			}
		}
		gs = append(gs, g)
	}
	return gs, nil
}

// ErrNoFreeGPUs is wrapped by Claim when too few GPUs are free.
var ErrNoFreeGPUs = errors.New("gpu: not enough free GPUs")

// Host is what an executor that runs attempts on this machine needs of its
// GPUs: the GPUs-per-instance-type table (the built-in one, overridden by
// the YAML file instanceTypes names, if any) and an allocator over the GPUs
// that Discover finds among given (every GPU nvidia-smi lists when given
// is empty). The process and container executors both start from it.
func Host(ctx context.Context, instanceTypes string, given []string) (Table, *Allocator, error) {
	table, err := LoadTable(instanceTypes)
	if err != nil {
		return nil, nil, err
	}
	gs, err := Discover(ctx, given)
	if err != nil {
		return nil, nil, err
	}
	return table, NewAllocator(gs), nil
}
