package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"qshare/executor/container"
	"qshare/fanout"
)

// The container half of `qshare bench e2e --executor container`: an image
// of one trivial program, the engine's own `run --rm` of it from the same
// number of clients (the baseline), and the start of every container as
// the engine reports it, so that both sides' start latency is measured
// the same way.

// trueProgram returns a static ELF executable for goarch that exits 0 at
// once, as `true` does: an ELF header, one loadable segment, and the exit
// system call. It is written here rather than copied from the host so
// that the image holds nothing but it, on any host of these
// architectures.
func trueProgram(goarch string) ([]byte, error) {
	var machine uint16
	var code []byte
	switch goarch {
	case "amd64":
		// mov eax, 60 (exit); xor edi, edi; syscall
		machine, code = 62, []byte{0xb8, 0x3c, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05}
	case "arm64":
		// mov x0, #0; mov x8, #93 (exit); svc #0
		machine, code = 183, []byte{0x00, 0x00, 0x80, 0xd2, 0xa8, 0x0b, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}
	default:
		return nil, fmt.Errorf("bench: no trivial program for %s: give --image", goarch)
	}
	const base, ehsize, phsize = 0x400000, 64, 56
	size := uint64(ehsize + phsize + len(code))
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}) // 64-bit, little-endian, version 1
	binary.Write(&b, le, struct {
		Type, Machine              uint16
		Version                    uint32
		Entry, Phoff, Shoff        uint64
		Flags                      uint32
		Ehsize, Phentsize, Phnum   uint16
		Shentsize, Shnum, Shstrndx uint16
	}{Type: 2, Machine: machine, Version: 1, Entry: base + ehsize + phsize, Phoff: ehsize, Ehsize: ehsize, Phentsize: phsize, Phnum: 1})
	binary.Write(&b, le, struct {
		Type, Flags                                uint32
		Offset, Vaddr, Paddr, Filesz, Memsz, Align uint64
	}{Type: 1, Flags: 5, Vaddr: base, Paddr: base, Filesz: size, Memsz: size, Align: 0x1000}) // PT_LOAD, R+X
	b.Write(code)
	return b.Bytes(), nil
}

// containerImage imports into the engine a FROM-scratch image that holds
// /true (trueProgram), tagged with its content's hash, unless the engine
// has it already; it returns its reference.
func containerImage(ctx context.Context, cli *client.Client) (string, error) {
	prog, err := trueProgram(runtime.GOARCH)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(prog)
	ref := "localhost/qshare-bench-true:" + hex.EncodeToString(sum[:6])
	if err := container.ImportScratch(ctx, cli, ref, []container.ScratchFile{{Name: "true", Mode: 0o755, Data: prog}}); err != nil {
		return "", fmt.Errorf("bench: the trivial image: %w", err)
	}
	return ref, nil
}

// containerSetup readies a run of the container executor: it finds the
// engine, gives it the trivial image (opt.image), and points the
// temporary server at it.
func containerSetup(ctx context.Context, opt *E2EOptions) (*ctrEngine, error) {
	en, err := openEngine(ctx, opt.ContainerHost)
	if err != nil {
		return nil, err
	}
	if opt.image, err = containerImage(ctx, en.cli); err != nil {
		en.cli.Close()
		return nil, err
	}
	opt.Server.ContainerHost = en.host
	return en, nil
}

// ctrEngine is the container engine of a benchmark run: its client, and
// what its own CLI is (podman, or docker with -H).
type ctrEngine struct {
	host    string
	cli     *client.Client
	podman  bool
	runtime string // the engine's default OCI runtime, given to `podman run`
}

func openEngine(ctx context.Context, host string) (*ctrEngine, error) {
	host = container.ResolveHost(host)
	if host == "" {
		return nil, fmt.Errorf("bench: no container engine found: give --container-host or set DOCKER_HOST")
	}
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("bench: --container-host %q: %w", host, err)
	}
	en := &ctrEngine{host: host, cli: cli}
	v, err := cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err == nil {
		var in client.SystemInfoResult
		in, err = cli.Info(ctx, client.InfoOptions{})
		en.runtime = in.Info.DefaultRuntime
	}
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("bench: the container engine at %s does not answer: %w", host, err)
	}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			en.podman = true
		}
	}
	return en, nil
}

// name is the engine's CLI, which the baseline runs.
func (en *ctrEngine) name() string {
	if en.podman {
		return "podman"
	}
	return "docker"
}

// runArgs are the arguments of the baseline's `podman run --rm` (against
// the local Podman, whose storage its service shares) or `docker -H HOST
// run --rm` of img as name.
func (en *ctrEngine) runArgs(name, img string) []string {
	if en.podman {
		args := []string{"run", "--rm", "--name", name}
		if en.runtime != "" {
			args = append(args, "--runtime", en.runtime)
		}
		return append(args, img, "/true")
	}
	return []string{"-H", en.host, "run", "--rm", "--name", name, img, "/true"}
}

// starts follows the engine's container start events: the moment each
// container's process runs, as the engine saw it, by container name and
// by the qshare.io/job-id label.
type starts struct {
	mu    sync.Mutex
	byKey map[string]time.Time
	n     int
}

// watchStarts follows start events until ctx ends.
func watchStarts(ctx context.Context, cli *client.Client) *starts {
	s := &starts{byKey: map[string]time.Time{}}
	ev := cli.Events(ctx, client.EventsListOptions{Filters: make(client.Filters).Add("type", "container").Add("event", "start")})
	go func() {
		for {
			select {
			case m := <-ev.Messages:
				s.add(m)
			case <-ev.Err:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

func (s *starts) add(m events.Message) {
	if m.Action != events.ActionStart {
		return
	}
	t := time.Unix(0, m.TimeNano)
	if m.TimeNano == 0 {
		t = time.Unix(m.Time, 0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	if n := m.Actor.Attributes["name"]; n != "" {
		s.byKey["name:"+n] = t
	}
	if j := m.Actor.Attributes[container.LabelJob]; j != "" {
		if _, seen := s.byKey["job:"+j]; !seen { // an attempt's first container
			s.byKey["job:"+j] = t
		}
	}
}

// latencies returns, for each key with a submit time, the time from it to
// the key's start event; missing counts the keys without one.
func (s *starts) latencies(submitted map[string]time.Time) (lat []time.Duration, missing int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, t0 := range submitted {
		t, ok := s.byKey[k]
		if !ok {
			missing++
			continue
		}
		lat = append(lat, t.Sub(t0))
	}
	return lat, missing
}

// awaitStarts waits (up to a few seconds: events trail the containers'
// ends) until every key in submitted has its start.
func (s *starts) awaitStarts(submitted map[string]time.Time) {
	for i := 0; i < 50; i++ {
		if _, missing := s.latencies(submitted); missing == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// baseline is the engine's own run of the same trivial containers.
type baseline struct {
	wall  time.Duration
	start Latency
}

// runBaseline runs jobs `run --rm` of img with the engine's CLI from
// clients parallel clients, each one after the other, and measures the
// wall and each container's start (the engine's start event) from the
// moment its command was run.
func runBaseline(ctx context.Context, en *ctrEngine, img string, jobs, clients int) (baseline, error) {
	bin, err := exec.LookPath(en.name())
	if err != nil {
		return baseline{}, fmt.Errorf("bench: the baseline runs `%s run --rm`, and %s is not installed: %w", en.name(), en.name(), err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st := watchStarts(wctx, en.cli)
	time.Sleep(200 * time.Millisecond) // the event stream is open before the first run
	prefix := fmt.Sprintf("qshare-bench-%d-", os.Getpid())
	var mu sync.Mutex
	submitted := map[string]time.Time{}
	start := time.Now()
	err = fanout.Each(ctx, clients, jobs, func(ctx context.Context, i int) error {
		name := prefix + fmt.Sprint(i)
		mu.Lock()
		submitted["name:"+name] = time.Now()
		mu.Unlock()
		out, err := exec.CommandContext(ctx, bin, en.runArgs(name, img)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("bench: %s %s: %v: %s", en.name(), strings.Join(en.runArgs(name, img), " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	})
	wall := time.Since(start)
	if err != nil {
		return baseline{}, err
	}
	st.awaitStarts(submitted)
	lat, missing := st.latencies(submitted)
	if missing > 0 {
		return baseline{}, fmt.Errorf("bench: the engine reported no start event for %d of %d `%s run` containers", missing, jobs, en.name())
	}
	return baseline{wall: wall, start: Latencies(lat)}, nil
}
