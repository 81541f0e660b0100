package e2e_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/config"
	"qshare/internal/transcript"
)

// docFiles are the documents whose examples TestDocExamples runs. tour.md
// is checked by TestTour, docs/cli by the reference test of cmd/qshare.
var docFiles = []string{"docs/concepts.md", "docs/configuration.md", "README.md"}

// block is a fenced block of a document.
type block struct {
	lang string
	line int
	text string
}

func fencedBlocks(t *testing.T, path string) []block {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur *block
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: n}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// TestDocExamples runs the examples of the docs, so that none can rot:
//
//   - every ```yaml block must parse as an apply file, unless its first
//     lines hold "# invalid"; a block whose first line is "# file: NAME" is
//     written to NAME in the document's working directory;
//   - in every ```console block, each "$ qshare ..." line runs, in order,
//     against a server of the document's own (with examples/ in the working
//     directory), and what the block shows after it must be what it prints
//     (job ids, times and ages aside). A command shown with an error line
//     ("qshare: ...") must fail. "./qshare" counts as qshare (the README
//     runs the binary it builds). A read (shares, jobs, describe, snapshot,
//     top) whose output the block shows is run again, for up to
//     settleWait, until it prints what the block shows: the block shows the
//     state once the server has acted on the commands before it, which
//     takes it a few milliseconds. `qshare serve` lines are not run (the
//     test runs the server), `qshare top` gets -n 1, and lines of other
//     programs are skipped.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	for _, doc := range docFiles {
		path := filepath.Join(root, doc)
		if _, err := os.Stat(path); os.IsNotExist(err) && doc == "README.md" {
			continue
		}
		t.Run(strings.ReplaceAll(doc, "/", "_"), func(t *testing.T) {
			e := newEnv(t)
			work := t.TempDir()
			if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(work, "examples")); err != nil {
				t.Fatal(err)
			}
			blocks := fencedBlocks(t, path)
			for _, b := range blocks {
				if b.lang != "yaml" {
					continue
				}
				first := strings.SplitN(b.text, "\n", 3)
				invalid := strings.Contains(strings.Join(first[:min(2, len(first))], "\n"), "# invalid")
				if name, ok := strings.CutPrefix(first[0], "# file: "); ok {
					if err := os.WriteFile(filepath.Join(work, strings.TrimSpace(name)), []byte(b.text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				_, err := config.Parse(doc, []byte(b.text), config.Options{AllowExternalReferences: true})
				if invalid && err == nil {
					t.Errorf("%s:%d: a yaml block marked # invalid parses", doc, b.line)
				}
				if !invalid && err != nil {
					t.Errorf("%s:%d: %v", doc, b.line, err)
				}
			}
			s := &transcript.Session{Exe: bin, Endpoint: e.Srv.Endpoint, Dir: work}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			ran := 0
			for _, b := range blocks {
				if b.lang != "console" && b.lang != "sh" && b.lang != "shell" || containerBlock(b) {
					continue // the README's container step: TestReadmeContainer
				}
				for _, c := range commands(b.text) {
					if rest, ok := strings.CutPrefix(c.line, "./qshare "); ok {
						c.line = "qshare " + rest
					}
					args := strings.Fields(c.line)
					if len(args) < 2 || args[0] != "qshare" || args[1] == "serve" {
						continue
					}
					args = unquote(t, c.line)[1:]
					if args[0] == "top" && !strings.Contains(c.line, " -n ") {
						args = append(args, "-n", "1")
					}
					out, code, err := s.Exec(ctx, args...)
					for deadline := time.Now().Add(settleWait); err == nil && code == 0 && c.output != "" && isRead(args[0]) &&
						transcript.Normalize(out) != transcript.Normalize(c.output) && time.Now().Before(deadline); {
						time.Sleep(20 * time.Millisecond)
						out, code, err = s.Exec(ctx, args...)
					}
					if err != nil {
						t.Fatalf("%s:%d: %s: %v", doc, b.line, c.line, err)
					}
					ran++
					wantFail := strings.HasPrefix(c.output, "qshare: ")
					if wantFail != (code != 0) {
						t.Errorf("%s:%d: %s exited with %d:\n%s", doc, b.line, c.line, code, out)
						continue
					}
					if c.output != "" && transcript.Normalize(out) != transcript.Normalize(c.output) {
						t.Errorf("%s:%d: %s printed\n%s\nbut the document shows\n%s", doc, b.line, c.line, out, c.output)
					}
				}
			}
			if ran == 0 && doc != "README.md" {
				t.Errorf("%s has no qshare command to run", doc)
			}
		})
	}
}

// settleWait bounds how long TestDocExamples runs a read again until it
// shows what its document shows.
const settleWait = 10 * time.Second

// isRead tells whether a qshare subcommand only reads, so that running it
// again changes nothing.
func isRead(sub string) bool {
	switch sub {
	case "shares", "jobs", "ls", "describe", "snapshot", "top":
		return true
	}
	return false
}

// command is one "$ ..." line of a console block and the output after it.
type command struct {
	line   string
	output string
}

func commands(text string) []command {
	var out []command
	for _, l := range strings.SplitAfter(text, "\n") {
		if rest, ok := strings.CutPrefix(l, "$ "); ok {
			out = append(out, command{line: strings.TrimSpace(rest)})
			continue
		}
		if len(out) > 0 && l != "" {
			out[len(out)-1].output += l
		}
	}
	return out
}

// unquote splits a shell command line with single and double quotes.
func unquote(t *testing.T, line string) []string {
	var args []string
	var cur strings.Builder
	inArg := false
	quote := rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inArg = r, true
		case r == ' ' || r == '\t':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		case r == '|' || r == '>' || r == '<' || r == '&' || r == ';':
			t.Fatalf("the doc test runs single commands, not shell pipelines: %s", line)
		default:
			cur.WriteRune(r)
			inArg = true
		}
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args
}

// TestCommandExamples runs the examples of the command line's own commands
// (the "Examples" of their --help, as docs/cli shows them; a unit test of
// cmd/qshare keeps docs/cli equal to the commands) against a server that
// holds the jobs they name.
func TestCommandExamples(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "examples"), filepath.Join(work, "examples")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "job.json"), []byte(`{"TrainingJobName":"from-payload","ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"1h"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	e.applyExample()
	for _, j := range []struct {
		share, name string
		prio        int
	}{{"QS1", "qs1-med", 2}, {"QS1", "qs1-low", 1}, {"QS2", "qs2-job-1", 1}, {"QS3", "resnet-1", 1}} {
		e.Submit(j.share, j.name, j.prio)
	}
	s := &transcript.Session{Exe: bin, Endpoint: e.Srv.Endpoint, Dir: work}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ran := map[string]int{}
	for _, name := range []string{"apply", "completion", "demo", "describe", "jobs", "logs", "priority", "shares", "snapshot", "submit", "terminate", "top"} {
		page := filepath.Join(root, "docs", "cli", "qshare_"+name+".md")
		for _, b := range fencedBlocks(t, page) {
			if b.lang != "sh" {
				continue
			}
			for _, line := range strings.Split(strings.ReplaceAll(b.text, "\\\n", " "), "\n") {
				line = strings.TrimSpace(line)
				if i := strings.Index(line, "  #"); i >= 0 {
					line = strings.TrimSpace(line[:i])
				}
				if !strings.HasPrefix(line, "qshare ") || strings.Contains(line, "--keep") {
					continue // comments, shell set-up, and the demo that waits for Ctrl-C
				}
				args := unquote(t, line)[1:]
				if args[0] == "top" {
					args = append(args, "-n", "1")
				}
				out, code, err := s.Exec(ctx, args...)
				if err != nil {
					t.Fatal(err)
				}
				ran[name]++
				if args[0] == "logs" {
					// The simulated executor keeps no output: the example
					// must reach the server and get that answer (or, until
					// the server mounts the endpoint, be told so).
					if !strings.Contains(out, "keeps no output") && !strings.Contains(out, "/qshare/v1/logs/") {
						t.Errorf("%s: %s", line, out)
					}
					continue
				}
				if code != 0 {
					t.Errorf("the example %q of qshare %s exited with %d:\n%s", line, name, code, out)
				}
			}
		}
	}
	for _, name := range []string{"apply", "describe", "jobs", "logs", "priority", "shares", "snapshot", "submit", "terminate", "top", "demo"} {
		if ran[name] == 0 {
			t.Errorf("no example of qshare %s ran", name)
		}
	}
}
