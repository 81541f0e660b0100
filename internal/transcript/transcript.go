// Package transcript runs qshare command lines against a qshare server, as
// a person would type them, and writes down what they print: as text for
// `qshare demo`, or as Markdown for the tour in docs/tour.md, which a test
// regenerates and compares so that the tour can never drift from what the
// commands really do.
//
// It drives the real binary (each command is a child process with
// QSHARE_ENDPOINT set) against a server its caller started, usually a
// private one (package serveproc). It is used by cmd/qshare (the demo) and
// by the command line's end-to-end tests; it holds no scheduling logic.
package transcript

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Format is how a Session writes its transcript.
type Format int

// Formats.
const (
	// Text is for a terminal: headings underlined, commands after "$ ".
	Text Format = iota
	// Markdown is for docs/: headings, paragraphs and console blocks.
	Markdown
)

// Session runs commands and writes their transcript to Out.
type Session struct {
	// Exe is the qshare binary.
	Exe string
	// Endpoint is the server the commands talk to.
	Endpoint string
	// Dir is the working directory of the commands ("" for the current one).
	Dir    string
	Out    io.Writer
	Format Format
	// Env is added to the commands' environment.
	Env []string
	// Width wraps the paragraphs of Say in Text format (0: 78).
	Width int
}

// Heading starts a section.
func (s *Session) Heading(title string) {
	if s.Format == Markdown {
		fmt.Fprintf(s.Out, "## %s\n\n", title)
		return
	}
	fmt.Fprintf(s.Out, "\n%s\n%s\n\n", title, strings.Repeat("─", len([]rune(title))))
}

// Say writes a paragraph.
func (s *Session) Say(text string) {
	text = strings.Join(strings.Fields(text), " ")
	if s.Format == Markdown {
		fmt.Fprintf(s.Out, "%s\n\n", text)
		return
	}
	width := s.Width
	if width == 0 {
		width = 78
	}
	fmt.Fprintf(s.Out, "%s\n\n", wrap(text, width))
}

// File writes content to name in Dir and shows it.
func (s *Session) File(name, content string) error {
	if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(content), 0o644); err != nil {
		return err
	}
	if s.Format == Markdown {
		fmt.Fprintf(s.Out, "`%s`:\n\n```yaml\n%s```\n\n", name, content)
		return nil
	}
	fmt.Fprintf(s.Out, "%s:\n\n%s\n", name, indent(content, "    "))
	return nil
}

// Run runs `qshare ARGS...`, shows the command and what it printed, and
// returns the output; it fails when the command does.
func (s *Session) Run(ctx context.Context, args ...string) (string, error) {
	out, code, err := s.run(ctx, args)
	if err != nil {
		return out, err
	}
	if code != 0 {
		return out, fmt.Errorf("qshare %s exited with %d:\n%s", strings.Join(args, " "), code, out)
	}
	return out, nil
}

// RunFail runs a command that is meant to fail, shows it, and fails when
// it does not.
func (s *Session) RunFail(ctx context.Context, args ...string) (string, error) {
	out, code, err := s.run(ctx, args)
	if err != nil {
		return out, err
	}
	if code == 0 {
		return out, fmt.Errorf("qshare %s succeeded, but it was meant to fail:\n%s", strings.Join(args, " "), out)
	}
	return out, nil
}

// Exec runs `qshare ARGS...` without showing anything, and returns its
// combined output and exit code.
func (s *Session) Exec(ctx context.Context, args ...string) (string, int, error) {
	cmd := exec.CommandContext(ctx, s.Exe, args...)
	cmd.Dir = s.Dir
	cmd.Env = append(append(os.Environ(), "QSHARE_ENDPOINT="+s.Endpoint), s.Env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode(), nil
	}
	if err != nil {
		return string(out), -1, err
	}
	return string(out), 0, nil
}

func (s *Session) run(ctx context.Context, args []string) (string, int, error) {
	out, code, err := s.Exec(ctx, args...)
	if err != nil {
		return out, code, err
	}
	line := "$ qshare " + Quote(args)
	if s.Format == Markdown {
		fmt.Fprintf(s.Out, "```console\n%s\n%s```\n\n", line, ensureNewline(out))
	} else {
		fmt.Fprintf(s.Out, "%s\n%s\n", line, ensureNewline(out))
	}
	return out, code, nil
}

func ensureNewline(s string) string {
	if s != "" && !strings.HasSuffix(s, "\n") {
		return s + "\n"
	}
	return s
}

// Quote joins args as a POSIX shell would read them back.
func Quote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

func indent(s, prefix string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" {
			b.WriteString(prefix + l)
		}
	}
	return b.String()
}

func wrap(text string, width int) string {
	var b strings.Builder
	col := 0
	for _, w := range strings.Fields(text) {
		n := len([]rune(w))
		if col > 0 && col+1+n > width {
			b.WriteString("\n")
			col = 0
		} else if col > 0 {
			b.WriteString(" ")
			col++
		}
		b.WriteString(w)
		col += n
	}
	return b.String()
}

// Normalize replaces what changes from run to run in a transcript (job
// ids, training-job suffixes, timestamps, ages, temporary paths) with fixed
// placeholders, so that two runs of the same script compare equal.
func Normalize(s string) string {
	for _, r := range normalizers {
		s = r.re.ReplaceAllString(s, r.with)
	}
	return s
}

var normalizers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<job-id>"},
	{regexp.MustCompile(`([A-Za-z0-9-]+?)[0-9a-f]{32}\b`), "$1<suffix>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\dZ?`), "<time>"},
	{regexp.MustCompile(`\b\d{13}\b`), "<epoch-ms>"},
	{regexp.MustCompile(`\b\d+[smhd]( ago)?\b`), "<age>"},
	{regexp.MustCompile(`/tmp/[^\s)"']+`), "<tmp>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
	// Table columns realign when a cell's width changes.
	{regexp.MustCompile(`[ \t]{2,}`), "  "},
}
