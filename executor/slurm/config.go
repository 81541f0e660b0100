package slurm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"qshare"
)

// Config is the --slurm-config file: how qshare's instance types map onto
// the cluster, where job files go, and whom Slurm charges.
//
//	sharedDir: /shared/qshare     # a directory every node sees at this path
//	account: ml-lab               # optional: sbatch --account
//	instanceTypes:
//	  ml.p4d.24xlarge: {partition: gpu, gres: "gpu:8", cpus: 96, memory: 1100G}
//	  ml.m5.large:     {partition: cpu, cpus: 2, memory: 8G, shareNodes: true}
type Config struct {
	// SharedDir holds the jobs' working directories and the attempts'
	// scripts, records and output, at the same path on the server and on
	// every node. Required; relative paths are taken from the config
	// file's directory.
	SharedDir string `yaml:"sharedDir"`
	// Account is what sbatch --account charges; empty: the user's default.
	Account string `yaml:"account"`
	// InstanceTypes maps each instance type jobs may ask for to its Slurm
	// resources. Required, at least one.
	InstanceTypes map[string]InstanceType `yaml:"instanceTypes"`
}

// InstanceType is what one instance of a type is in Slurm: a node of
// Partition with Gres, CPUs and Memory.
type InstanceType struct {
	// Partition is the partition its nodes are in. Required.
	Partition string `yaml:"partition"`
	// Gres is the --gres of one node, "gpu:8" or "gpu:a100:8"; empty for
	// a type without GPUs.
	Gres string `yaml:"gres"`
	// CPUs and Memory are one instance's size ("16G", "512M", or MB as a
	// number). They bound what a shared node gives an instance, and say
	// what an instance is in warnings.
	CPUs   int    `yaml:"cpus"`
	Memory string `yaml:"memory"`
	// ShareNodes lets instances of the type share a node with other jobs
	// (--cpus-per-task=CPUs --mem=Memory) rather than hold whole nodes
	// (--exclusive, the default): for small CPU-only types.
	ShareNodes bool `yaml:"shareNodes"`
}

// GPUs returns the number of GPUs in the type's Gres (0 without one).
func (t InstanceType) GPUs() int {
	if t.Gres == "" {
		return 0
	}
	parts := strings.Split(t.Gres, ":")
	n, err := strconv.Atoi(parts[len(parts)-1])
	if err != nil || len(parts) < 2 {
		return 0
	}
	return n
}

var (
	gresRe   = regexp.MustCompile(`^[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)?:[0-9]{1,4}$`)
	memoryRe = regexp.MustCompile(`^[0-9]{1,9}[KMGT]?$`)
	// slurmWordRe is a partition's or an account's characters; with
	// slurmWord's length check it is ^[A-Za-z0-9_.-]{1,64}$, without
	// compiling 64 copies of the class at every start of the binary.
	slurmWordRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// slurmWord reports whether s is a partition or account name: 1 to 64
// letters, digits, dots, hyphens and underscores.
func slurmWord(s string) bool { return len(s) <= 64 && slurmWordRe.MatchString(s) }

// LoadConfig reads and checks a --slurm-config file. Every problem is a
// *qshare.Error with code EINVALID that names the field.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, qshare.Errorf(qshare.EINVALID, "--slurm-config: %v", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, err
	}
	if c.SharedDir != "" && !filepath.IsAbs(c.SharedDir) {
		abs, err := filepath.Abs(filepath.Join(filepath.Dir(path), c.SharedDir))
		if err != nil {
			return Config{}, qshare.Errorf(qshare.EINVALID, "--slurm-config: sharedDir %q: %v", c.SharedDir, err)
		}
		c.SharedDir = abs
	}
	return c, nil
}

// ParseConfig parses and checks the text of a --slurm-config file; a
// relative sharedDir is left as it is (LoadConfig resolves it).
func ParseConfig(b []byte) (Config, error) {
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, qshare.Errorf(qshare.EINVALID, "--slurm-config is not valid YAML of the expected shape (sharedDir, account, instanceTypes: {TYPE: {partition, gres, cpus, memory, shareNodes}}): %v", err)
	}
	return c, c.Check()
}

// Check reports the first problem of c, naming the field.
func (c Config) Check() error {
	bad := func(format string, a ...any) error {
		return qshare.Errorf(qshare.EINVALID, "--slurm-config: "+format, a...)
	}
	if strings.TrimSpace(c.SharedDir) == "" {
		return bad("sharedDir is missing: name a directory that every node sees at the same path")
	}
	if strings.ContainsAny(c.SharedDir, "\x00\n") {
		return bad("sharedDir holds a NUL or a newline")
	}
	if c.Account != "" && !slurmWord(c.Account) {
		return bad("account %q is not a Slurm account name (letters, digits, '_', '.', '-')", c.Account)
	}
	if len(c.InstanceTypes) == 0 {
		return bad("instanceTypes is empty: map at least one instance type to a partition, for example ml.p4d.24xlarge: {partition: gpu, gres: \"gpu:8\", cpus: 96, memory: 1100G}")
	}
	names := make([]string, 0, len(c.InstanceTypes))
	for n := range c.InstanceTypes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t := c.InstanceTypes[n]
		if n == "" || strings.ContainsAny(n, " \t\n\x00") {
			return bad("instanceTypes has the name %q: give an instance type such as ml.g5.xlarge", n)
		}
		if !slurmWord(t.Partition) {
			return bad("instanceTypes.%s.partition %q: give the name of a Slurm partition", n, t.Partition)
		}
		if t.Gres != "" && !gresRe.MatchString(t.Gres) {
			return bad("instanceTypes.%s.gres %q: give a --gres string such as gpu:8 or gpu:a100:8", n, t.Gres)
		}
		if t.CPUs < 0 || t.CPUs > 1<<16 {
			return bad("instanceTypes.%s.cpus %d: give the CPUs of one node", n, t.CPUs)
		}
		if t.Memory != "" && !memoryRe.MatchString(t.Memory) {
			return bad("instanceTypes.%s.memory %q: give a size such as 16G, 512M or a number of MB", n, t.Memory)
		}
		if t.ShareNodes && (t.CPUs == 0 || t.Memory == "") {
			return bad("instanceTypes.%s has shareNodes but no cpus or memory: a shared node gives each instance what these say", n)
		}
	}
	return nil
}

// typeFor returns the configured type of name, or an EINVALID error
// listing the known ones.
func (c Config) typeFor(name string) (InstanceType, error) {
	t, ok := c.InstanceTypes[name]
	if !ok {
		names := make([]string, 0, len(c.InstanceTypes))
		for n := range c.InstanceTypes {
			names = append(names, n)
		}
		sort.Strings(names)
		return t, qshare.Errorf(qshare.EINVALID, "instance type %q is not in the Slurm executor's configuration: use one of %s", name, strings.Join(names, ", "))
	}
	return t, nil
}

func (t InstanceType) String() string {
	return fmt.Sprintf("partition %s, gres %q, %d CPUs, memory %s", t.Partition, t.Gres, t.CPUs, t.Memory)
}
