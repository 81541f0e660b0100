package main

import (
	"bytes"
	"strings"
	"testing"

	"qshare/auth"
)

// qshare auth new-key prints an entry of the auth file's principals that
// loads as it is, with a new key each time.
func TestAuthNewKey(t *testing.T) {
	run := func(name string) (string, error) {
		var out bytes.Buffer
		newKeyCmd.SetOut(&out)
		err := newKeyCmd.RunE(newKeyCmd, []string{name})
		return out.String(), err
	}
	a, err := run("alice")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := run("alice")
	if a == b {
		t.Fatal("two runs printed the same key")
	}
	k, err := auth.Parse([]byte("principals:\n"+a), "000000000000")
	if err != nil {
		t.Fatalf("the output does not load as a principal:\n%s\n%v", a, err)
	}
	id := strings.Fields(a[strings.Index(a, "id:"):])[1]
	if p, secret, ok := k.Principal(id); !ok || p.Name != "alice" || len(id) != 20 || len(secret) != 40 {
		t.Fatalf("key %s of %+v (secret %d characters)", id, p, len(secret))
	}
	if _, err := run("not a name"); err == nil {
		t.Fatal("a name with spaces was accepted")
	}
}
