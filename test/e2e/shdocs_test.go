package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"qshare/internal/longtest"
	"qshare/internal/transcript"
)

// shellAllowed are the command lines of the docs that may fail here, because
// they need something this test cannot give them, each with the reason. A
// line is matched by its text after continuations are joined, comments
// removed and "./qshare" made "qshare". Keep it short: a line listed here is
// not checked at all. It is empty: the one line that needs something absent
// here (bench e2e --vs-slurm, which needs Slurm and root) only runs with
// --help, which needs neither.
var shellAllowed = map[string]string{}

// TestShellDocExamples checks every qshare command line of the docs that
// TestDocExamples and TestTour do not run: the ```sh, ```shell, ```bash,
// ```console and unlabelled blocks of every docs/*.md and
// docs/performance/*.md but docFiles and tour.md. Lines joined by "\" are one command; comments are removed;
// "./qshare" and "go run ./cmd/qshare" count as qshare, and leading VAR=value
// words and "time" are set aside; lines of other programs (go test, aws, ...)
// are skipped. In a console block only the "$ " lines are commands.
//
//   - Quick commands (simulate, check-events, apply, demo, the client
//     commands) run, in order, in a scratch directory laid out like the
//     repository (examples/ and sim/ linked, an empty docs/ tree, and
//     ../shared linked), against a private server; a path under /tmp/ is
//     moved into the scratch directory. They must exit 0, unless the line's
//     comment starts with "fails". A line that reads from ../shared/ is
//     skipped, with the reason, when that file is not there (a clone with
//     nothing beside it), and so is every later line that reads a file
//     which a skipped line would have written (skippedOutputs). A line
//     that replays the whole Philly trace runs only with QSHARE_LONG=1;
//     otherwise it runs with --help, and counts as skipped for the lines
//     after it (replaysPhilly).
//   - Commands that run until stopped (serve, bench, top without -n,
//     logs -f, demo --keep) run with --help added: that fails on an unknown
//     flag, and the usage it prints must name the doc's subcommand, so a
//     renamed flag or subcommand in a doc is caught.
func TestShellDocExamples(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	// docs/performance/ holds the lab notebooks (history.md): their
	// commands are checked too.
	more, err := filepath.Glob(filepath.Join(root, "docs", "performance", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, more...)
	scratch := t.TempDir()
	work := shellScratch(t, scratch)
	var srv *env // started at the first client command
	skipped := skippedOutputs{}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ran := 0
	for _, path := range docs {
		doc, _ := filepath.Rel(root, path)
		if slices.Contains(docFiles, doc) || doc == "docs/tour.md" {
			continue
		}
		for _, b := range fencedBlocks(t, path) {
			if b.lang != "" && b.lang != "sh" && b.lang != "shell" && b.lang != "bash" && b.lang != "console" {
				continue
			}
			for _, c := range shellCommands(b) {
				where := fmt.Sprintf("%s:%d", doc, c.line)
				if reason, ok := shellAllowed[c.text]; ok {
					t.Logf("%s: not checked (%s): %s", where, reason, c.text)
					continue
				}
				args := unquote(t, c.text)[1:]
				s := &transcript.Session{Exe: bin, Dir: work, Env: c.env}
				replay := replaysPhilly(args) && !longtest.On()
				if long(args) || replay {
					out, code, err := s.Exec(ctx, append(slices.Clone(args), "--help")...)
					if err != nil {
						t.Fatalf("%s: %s --help: %v", where, c.text, err)
					}
					ran++
					t.Logf("%s: %s --help: exit %d", where, c.text, code)
					if code != 0 {
						t.Errorf("%s: %s --help exited with %d:\n%s", where, c.text, code, out)
						continue
					}
					if want, got := commandPath(args), usagePath(out); want != got {
						t.Errorf("%s: %s: %q is not a command (--help shows the usage of %q)", where, c.text, want, got)
					}
					if replay {
						for i, a := range args {
							args[i] = scratchTmp(scratch, a)
						}
						skipped.add(work, args, where, "the whole Philly trace's replay runs with QSHARE_LONG=1")
					}
					continue
				}
				for i, a := range args {
					args[i] = scratchTmp(scratch, a)
				}
				if missing := missingShared(work, args); missing != "" {
					// The replay of ../shared's data needs the data; what
					// it would have written is missing too (see skipped).
					why := fmt.Sprintf("%s is not here (it comes beside the repository, in ../shared)", missing)
					t.Logf("%s: skipped, %s: %s", where, why, c.text)
					skipped.add(work, args, where, why)
					continue
				}
				if path, by := skipped.needs(work, args); path != "" {
					t.Logf("%s: skipped, it reads %s, which %s would have written (%s): %s", where, path, by.where, by.why, c.text)
					skipped.add(work, args, where, by.why)
					continue
				}
				if client(args) {
					if srv == nil {
						srv = newEnv(t)
					}
					s.Endpoint = srv.Srv.Endpoint
				}
				start := time.Now()
				out, code, err := s.Exec(ctx, args...)
				if err != nil {
					t.Fatalf("%s: %s: %v", where, c.text, err)
				}
				ran++
				t.Logf("%s: %s: exit %d in %v", where, c.text, code, time.Since(start).Round(time.Millisecond))
				if c.fails != (code != 0) {
					t.Errorf("%s: %s exited with %d:\n%s", where, c.text, code, out)
				}
			}
		}
	}
	if ran == 0 {
		t.Error("the docs have no qshare command to check")
	}
	for line := range shellAllowed {
		found := false
		for _, path := range docs {
			for _, b := range fencedBlocks(t, path) {
				for _, c := range shellCommands(b) {
					found = found || c.text == line
				}
			}
		}
		if !found {
			t.Errorf("shellAllowed names %q, which no doc holds any more", line)
		}
	}
}

// shellScratch lays out TMP/repo like the repository for the docs' relative
// paths and returns it: examples/ and sim/ are links to the real ones, docs/
// holds the real docs' directories but none of their files (so a command
// that writes docs/philly/report.json writes it here), and TMP/shared is the
// real ../shared.
func shellScratch(t *testing.T, tmp string) string {
	t.Helper()
	work := filepath.Join(tmp, "repo")
	for _, dir := range []string{work, filepath.Join(tmp, "tmp")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"examples", "sim"} {
		if err := os.Symlink(filepath.Join(root, name), filepath.Join(work, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(root), "shared"), filepath.Join(tmp, "shared")); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		return os.MkdirAll(filepath.Join(work, rel), 0o755)
	})
	if err != nil {
		t.Fatal(err)
	}
	return work
}

// shellCommand is one qshare command line of a doc.
type shellCommand struct {
	line  int      // the line of the document where it starts
	text  string   // "qshare ...", continuations joined, comment removed
	env   []string // the VAR=value words before it
	fails bool     // its comment starts with "fails"
}

// shellCommands returns the qshare command lines of a block.
func shellCommands(b block) []shellCommand {
	var out []shellCommand
	lines := strings.Split(b.text, "\n")
	for i := 0; i < len(lines); i++ {
		start := b.line + 1 + i
		line := lines[i]
		if b.lang == "console" {
			rest, ok := strings.CutPrefix(line, "$ ")
			if !ok {
				continue
			}
			line = rest
		}
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[i])
		}
		line, comment := cutComment(line)
		words := strings.Fields(line)
		var env []string
		for len(words) > 0 && isAssignment(words[0]) {
			env, words = append(env, words[0]), words[1:]
		}
		if len(words) > 0 && words[0] == "time" {
			words = words[1:]
		}
		switch {
		case len(words) >= 3 && words[0] == "go" && words[1] == "run" && strings.TrimSuffix(words[2], "/") == "./cmd/qshare":
			words = append([]string{"qshare"}, words[3:]...)
		case len(words) > 0 && words[0] == "./qshare":
			words[0] = "qshare"
		}
		if len(words) < 2 || words[0] != "qshare" {
			continue
		}
		if words[len(words)-1] == "&" { // a server started in the background
			words = words[:len(words)-1]
		}
		out = append(out, shellCommand{
			line:  start,
			text:  strings.Join(words, " "),
			env:   env,
			fails: strings.HasPrefix(comment, "fails"),
		})
	}
	return out
}

// cutComment splits a shell line at a "#" that starts a word outside quotes.
func cutComment(line string) (string, string) {
	quote := rune(0)
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
		}
	}
	return strings.TrimSpace(line), ""
}

// isAssignment tells whether a word is an environment assignment, VAR=value.
func isAssignment(w string) bool {
	name, _, ok := strings.Cut(w, "=")
	if !ok || name == "" {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// long tells whether a command runs until it is stopped.
func long(args []string) bool {
	has := func(flags ...string) bool {
		for _, a := range args {
			name, _, _ := strings.Cut(a, "=")
			if slices.Contains(flags, name) {
				return true
			}
		}
		return false
	}
	switch args[0] {
	case "serve", "bench":
		return true
	case "top":
		return !has("-n", "--iterations")
	case "logs":
		return has("-f", "--follow")
	case "demo":
		return has("--keep")
	}
	return false
}

// replaysPhilly tells whether a command reads the whole Philly trace
// (../shared/data/philly/): each such simulate or check-events of the docs
// takes 4 to 10 s of one core, about 50 s in all, so they run with
// QSHARE_LONG=1 (.ci/run's long step), and with --help otherwise, as the
// commands that run until stopped do; every run replays the trace's first
// 5,000 jobs and checks their event log (sim's TestPhillyPrefixClean).
func replaysPhilly(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "../shared/data/philly/") })
}

// client tells whether a command talks to a server.
func client(args []string) bool {
	switch args[0] {
	case "simulate", "demo", "completion", "help":
		return false
	case "check-events":
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--endpoint") })
	}
	return true
}

// commandPath is "qshare" and the words of args before the first flag.
func commandPath(args []string) string {
	words := []string{"qshare"}
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// usagePath is the command path of the usage line of a --help output:
// "qshare bench" for "qshare bench [command]".
func usagePath(help string) string {
	_, rest, ok := strings.Cut(help, "Usage:\n")
	if !ok {
		return ""
	}
	line, _, _ := strings.Cut(rest, "\n")
	var words []string
	for _, w := range strings.Fields(line) {
		if strings.ContainsAny(w[:1], "[-<") || strings.Contains(w, "|") || strings.ToLower(w) != w {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// missingShared returns the first argument under ../shared that does not
// exist from work, or "".
func missingShared(work string, args []string) string {
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if strings.HasPrefix(a, "../shared/") {
			if _, err := os.Stat(filepath.Join(work, a)); err != nil {
				return a
			}
		}
	}
	return ""
}

// skippedOutputs are the files that skipped command lines would have
// written: every path-like argument of a skipped line (see pathLike) that
// did not exist when it was skipped, as an absolute path, with the line and
// why it was skipped. A later line that reads one of them, while it still
// does not exist, is skipped too, and so are the lines that read what that
// one would have written: on a clone without ../shared, the Philly replay
// is skipped, and so is the check of the event log it writes.
type skippedOutputs map[string]skippedBy

// skippedBy is the skipped line that would have written a file.
type skippedBy struct {
	where string // doc:line
	why   string // why it was skipped, first cause
}

// add records the arguments of a skipped line, run in dir.
func (s skippedOutputs) add(dir string, args []string, where, why string) {
	for _, p := range pathArgs(dir, args) {
		if _, err := os.Stat(p); err != nil {
			if _, ok := s[p]; !ok {
				s[p] = skippedBy{where: where, why: why}
			}
		}
	}
}

// needs returns the first argument of a line, run in dir, that a skipped
// line would have written and that does not exist, and that line.
func (s skippedOutputs) needs(dir string, args []string) (string, skippedBy) {
	for _, p := range pathArgs(dir, args) {
		by, ok := s[p]
		if !ok {
			continue
		}
		if _, err := os.Stat(p); err != nil {
			return p, by
		}
	}
	return "", skippedBy{}
}

// pathArgs returns the path-like arguments of a command line (alone or as a
// flag's value), made absolute from dir.
func pathArgs(dir string, args []string) []string {
	var out []string
	for _, a := range args[1:] {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if !pathLike(a) {
			continue
		}
		if !filepath.IsAbs(a) {
			a = filepath.Join(dir, a)
		}
		out = append(out, filepath.Clean(a))
	}
	return out
}

// pathLike tells whether a command-line word names a file: it is not a flag
// or a URL, and it holds a "/" or ends in an extension (".jsonl").
func pathLike(w string) bool {
	if w == "" || strings.HasPrefix(w, "-") || strings.Contains(w, "://") || strings.ContainsAny(w, "= ") {
		return false
	}
	if strings.Contains(w, "/") {
		return true
	}
	ext := filepath.Ext(w)
	if len(ext) < 2 {
		return false
	}
	for _, r := range ext[1:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// scratchTmp moves a path under /tmp/ (alone or as a flag's value) into
// TMP/tmp, so that the test writes nothing outside its own directory.
func scratchTmp(scratch, arg string) string {
	flag, v, ok := strings.Cut(arg, "=")
	if !ok || !strings.HasPrefix(arg, "-") {
		flag, v = "", arg
	}
	rest, ok := strings.CutPrefix(v, "/tmp/")
	if !ok {
		return arg
	}
	v = filepath.Join(scratch, "tmp", rest)
	if flag != "" {
		return flag + "=" + v
	}
	return v
}

// TestShellCommands checks how TestShellDocExamples reads a block.
func TestShellCommands(t *testing.T) {
	t.Parallel()
	b := block{lang: "sh", line: 10, text: `go build -o qshare ./cmd/qshare
./qshare serve --addr 127.0.0.1:8751 --data-dir "$(mktemp -d)" &
qshare simulate --config a.yaml \
  --trace "b c.csv"   # a comment
QSHARE_X=1 time qshare top -n 1
go run ./cmd/qshare bench soak --duration 2m
qshare apply -f bad.yaml   # fails: the file is wrong
# qshare jobs
aws batch describe-job-queues
`}
	got := shellCommands(b)
	want := []shellCommand{
		{line: 12, text: `qshare serve --addr 127.0.0.1:8751 --data-dir "$(mktemp -d)"`},
		{line: 13, text: `qshare simulate --config a.yaml --trace "b c.csv"`},
		{line: 15, text: "qshare top -n 1", env: []string{"QSHARE_X=1"}},
		{line: 16, text: "qshare bench soak --duration 2m"},
		{line: 17, text: "qshare apply -f bad.yaml", fails: true},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got  %v\nwant %v", got, want)
	}
	for _, c := range []struct {
		args         []string
		long, client bool
	}{
		{[]string{"serve"}, true, true},
		{[]string{"top"}, true, true},
		{[]string{"top", "-n", "1"}, false, true},
		{[]string{"logs", "j", "-f"}, true, true},
		{[]string{"demo"}, false, false},
		{[]string{"demo", "--keep"}, true, false},
		{[]string{"simulate", "--config", "a"}, false, false},
		{[]string{"check-events", "f", "--config", "a"}, false, false},
		{[]string{"check-events", "--endpoint=http://x"}, false, true},
		{[]string{"jobs"}, false, true},
	} {
		if long(c.args) != c.long || client(c.args) != c.client {
			t.Errorf("%v: long %v client %v, want %v %v", c.args, long(c.args), client(c.args), c.long, c.client)
		}
	}
	if got := usagePath("Long text.\n\nUsage:\n  qshare bench kueue-baseline [flags]\n"); got != "qshare bench kueue-baseline" {
		t.Errorf("usagePath: %q", got)
	}
	if got := scratchTmp("/s", "--events=/tmp/e.jsonl"); got != "--events=/s/tmp/e.jsonl" {
		t.Errorf("scratchTmp: %q", got)
	}

	// A skipped line's outputs, and what depends on them, are skipped; an
	// input that exists, a flag's plain value and an unrelated file are not.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	sk := skippedOutputs{}
	sk.add(dir, []string{"simulate", "--config", "a.yaml", "--trace-format", "philly", "--events=/s/tmp/p.jsonl", "--report", "r/report.json"}, "d.md:1", "no trace")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check-events", "/s/tmp/p.jsonl", "--config", "a.yaml"}, "/s/tmp/p.jsonl"},
		{[]string{"x", "--in=r/report.json"}, filepath.Join(dir, "r/report.json")},
		{[]string{"check-events", "other.jsonl", "--config", "a.yaml"}, ""},
		{[]string{"simulate", "--trace-format", "philly", "--config", "a.yaml"}, ""},
	} {
		if got, by := sk.needs(dir, c.args); got != c.want || (got != "" && by.where != "d.md:1") {
			t.Errorf("needs(%v) = %q, %v; want %q", c.args, got, by, c.want)
		}
	}
	for w, want := range map[string]bool{"a.yaml": true, "docs/philly": true, "philly": false, "30m": false, "1.5": false, "http://x/y": false, "--f": false} {
		if pathLike(w) != want {
			t.Errorf("pathLike(%q) = %v", w, !want)
		}
	}
}
