// Command job is the static test program in the container executor's test
// image: it plays an executortest.Job from its flags (run this long, exit
// with this code, react to SIGTERM this way, print this line, print the
// environment) inside a container, as executortest.Script does in a shell.
// With -resolve it looks up host names and fails if one does not resolve,
// for the multi-instance test; with -ifaces and -dial it says which network
// interfaces it has and whether it reaches an address, for the network
// isolation test.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	run := flag.Duration("run", 0, "how long to run before exiting on its own")
	code := flag.Int("exit", 0, "exit code when it ends on its own")
	onStop := flag.String("onstop", "die", "reaction to SIGTERM: die, checkpoint or ignore")
	ckpt := flag.Duration("ckpt", 0, "how long a checkpoint on SIGTERM takes")
	output := flag.String("output", "", "a line to print as it starts, with $VARIABLES of its environment expanded")
	gate := flag.String("gate", "", "a file to wait for: the job ends once it exists (printing \"done\"), or after -run if that is set; with -train, its training does")
	env := flag.Bool("env", false, "print the environment, NUL-separated, as env -0 does")
	resolve := flag.String("resolve", "", "a comma-separated list of host names that must resolve")
	failure := flag.String("failure", "", "a line to write to /opt/ml/output/failure before exiting")
	write := flag.String("write", "", "a comma-separated list of files to create, each holding the uid:gid it runs as")
	steps := flag.Int("train", 0, "train for this many steps of -step each, checkpointing to /opt/ml/checkpoints/step on SIGTERM and resuming from it")
	stepTime := flag.Duration("step", 200*time.Millisecond, "how long one training step takes")
	failOn := flag.String("failon", "", "HOST:CODE: on the host SM_CURRENT_HOST names, exit at once with CODE")
	copyArg := flag.String("copy", "", "FROM:TO: copy a file, as a job reads its input and writes its model")
	ifaces := flag.Bool("ifaces", false, "print the network interfaces' names, as \"interfaces: lo,eth0\"")
	dial := flag.String("dial", "", "HOST:PORT: try a TCP connection (2 s at most) and print \"dial HOST:PORT: ok\" or why not; the HOST gateway is the default route's")
	flag.Parse()
	if *copyArg != "" {
		from, to, _ := strings.Cut(*copyArg, ":")
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(to, b, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "copying: %v\n", err)
			os.Exit(7)
		}
	}
	if *write != "" {
		for _, p := range strings.Split(*write, ",") {
			if err := os.WriteFile(p, []byte(fmt.Sprintf("%d:%d\n", os.Getuid(), os.Getgid())), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "writing %s: %v\n", p, err)
				os.Exit(6)
			}
		}
	}
	if *failure != "" {
		if err := os.WriteFile("/opt/ml/output/failure", []byte(*failure+"\nmore detail\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "writing the failure file: %v\n", err)
		}
	}
	if h, c, ok := strings.Cut(*failOn, ":"); ok && h == os.Getenv("SM_CURRENT_HOST") {
		var code int
		fmt.Sscanf(c, "%d", &code)
		fmt.Printf("%s fails with code %d\n", h, code)
		os.Exit(code)
	}
	if *steps > 0 {
		os.Exit(train(*steps, *stepTime, *gate))
	}
	if *env {
		for _, kv := range os.Environ() {
			fmt.Print(kv + "\x00")
		}
	}
	if *output != "" {
		fmt.Println(os.ExpandEnv(*output))
	}
	if *resolve != "" {
		for _, h := range strings.Split(*resolve, ",") {
			var addrs []string
			var err error
			for try := 0; try < 600; try++ { // up to a minute: the other hosts may start late on a loaded machine
				if addrs, err = net.LookupHost(h); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "resolving %s: %v\n", h, err)
				os.Exit(5)
			}
			fmt.Printf("%s resolves to %v\n", h, addrs)
		}
	}
	if *ifaces {
		is, err := net.Interfaces()
		if err != nil {
			fmt.Fprintf(os.Stderr, "interfaces: %v\n", err)
			os.Exit(5)
		}
		var names []string
		for _, i := range is {
			names = append(names, i.Name)
		}
		fmt.Printf("interfaces: %s\n", strings.Join(names, ","))
	}
	if *dial != "" {
		if port, ok := strings.CutPrefix(*dial, "gateway:"); ok {
			*dial = net.JoinHostPort(defaultGateway(), port)
		}
		if c, err := net.DialTimeout("tcp", *dial, 2*time.Second); err != nil {
			fmt.Printf("dial %s: %v\n", *dial, err)
		} else {
			c.Close()
			fmt.Printf("dial %s: ok\n", *dial)
		}
	}
	sig := make(chan os.Signal, 1)
	switch *onStop {
	case "checkpoint":
		signal.Notify(sig, syscall.SIGTERM)
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
	}
	fmt.Println("ready")
	var limit <-chan time.Time
	if *run > 0 || *gate == "" {
		limit = time.After(*run)
	}
	select {
	case <-limit:
		os.Exit(*code)
	case <-opened(*gate):
		fmt.Println("done")
		os.Exit(*code)
	case <-sig:
		time.Sleep(*ckpt)
		os.Exit(0)
	}
}

// opened returns a channel closed once the file gate exists (polled every
// 50ms); nil, which never fires, for no gate.
func opened(gate string) <-chan struct{} {
	if gate == "" {
		return nil
	}
	c := make(chan struct{})
	go func() {
		for {
			if _, err := os.Stat(gate); err == nil {
				close(c)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return c
}

// train plays a trainer that checkpoints on SIGTERM: it counts steps from
// its last checkpoint, and on SIGTERM saves the step it reached and exits 0.
// It finishes after steps steps, or once the file gate exists.
func train(steps int, each time.Duration, gate string) int {
	const ckpt = "/opt/ml/checkpoints/step"
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	n := 0
	if b, err := os.ReadFile(ckpt); err == nil {
		fmt.Sscanf(string(b), "%d", &n)
		fmt.Printf("resumed from step %d\n", n)
	}
	t := time.NewTicker(each)
	defer t.Stop()
	done := opened(gate)
	for n < steps {
		select {
		case <-done:
			steps = n // let go: finish now
		case <-sig:
			if err := os.WriteFile(ckpt, []byte(fmt.Sprintf("%d\n", n)), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "checkpoint: %v\n", err)
				return 1
			}
			fmt.Printf("SIGTERM: checkpointed step %d\n", n)
			return 0
		case <-t.C:
			n++
			fmt.Printf("step %d\n", n)
		}
	}
	fmt.Printf("finished after step %d\n", n)
	return 0
}

// defaultGateway is the gateway of the default route in /proc/net/route
// (its address in hex, least significant byte first), or "none".
func defaultGateway() string {
	b, err := os.ReadFile("/proc/net/route")
	if err != nil {
		return "none"
	}
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		var g uint32
		if len(f) > 2 && f[1] == "00000000" {
			if _, err := fmt.Sscanf(f[2], "%x", &g); err == nil {
				return net.IPv4(byte(g), byte(g>>8), byte(g>>16), byte(g>>24)).String()
			}
		}
	}
	return "none"
}
