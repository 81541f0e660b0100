package transcript

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

func TestQuoteRoundTripsThroughTheShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	args := []string{"plain", "with space", "it's", `"double"`, "", "a=b", "--lr", "0.1", "$HOME", "qs1*"}
	script := "for a in " + Quote(args) + "; do printf '[%s]\\n' \"$a\"; done"
	got, err := exec.Command(sh, "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for _, a := range args {
		want.WriteString("[" + a + "]\n")
	}
	if string(got) != want.String() {
		t.Errorf("%s\nprinted\n%s\nwant\n%s", Quote(args), got, want.String())
	}
	if q := Quote([]string{"submit", "--queue", "training", "--env", "QSHARE_SIM_DURATION=1h"}); q != "submit --queue training --env QSHARE_SIM_DURATION=1h" {
		t.Errorf("plain words were quoted: %s", q)
	}
}

func TestNormalize(t *testing.T) {
	a := "job x submitted: 76f1912b-323c-441b-9a69-d325b34e6dd6\nCreated:  2026-11-29 23:23:07Z (3s ago)\n  1  awsbatchbert-large4b5bdce17755a3e0d6283e3b9fd64c44  x\nNAME  AGE\nx     12m\nlistening on http://127.0.0.1:39033 (data in /tmp/abc/data)\n"
	b := "job x submitted: 2f9c3780-dc86-4d42-8bc5-1523759973e7\nCreated:  2026-11-30 01:02:03Z (0s ago)\n  1  awsbatchbert-large0123456789abcdef0123456789abcdef  x\nNAME  AGE\nx  4h\nlistening on http://127.0.0.1:8750 (data in /tmp/other/data)\n"
	if Normalize(a) != Normalize(b) {
		t.Errorf("runs differ after normalizing:\n%s\n%s", Normalize(a), Normalize(b))
	}
	if Normalize("priority 3") == Normalize("priority 4") || Normalize("QS1") == Normalize("QS2") {
		t.Error("Normalize hides what matters")
	}
}

func TestSayWraps(t *testing.T) {
	var b bytes.Buffer
	s := &Session{Out: &b, Width: 20}
	s.Say("one two three four five six seven eight")
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if len(l) > 20 {
			t.Errorf("line %q is longer than 20", l)
		}
	}
	b.Reset()
	s.Format = Markdown
	s.Say("one\n   two")
	if b.String() != "one two\n\n" {
		t.Errorf("markdown paragraph %q", b.String())
	}
}
