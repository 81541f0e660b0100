package freeport

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestPortsBelowTheEphemeralRange(t *testing.T) {
	hi, ok := ephemeralLow()
	if !ok || hi-low < 1000 {
		t.Skipf("the ephemeral range leaves no room below it here (its first port: %d)", hi)
	}
	seen := map[int]bool{}
	for range 3 {
		ports, err := Ports(20)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if p < low || p >= hi {
				t.Errorf("port %d is outside [%d, %d)", p, low, hi)
			}
			if seen[p] {
				t.Errorf("port %d given twice", p)
			}
			seen[p] = true
		}
	}
}

// A port whose file another process holds locked is not chosen, nor one
// that this process was given before.
func TestLockedPortsAreSkipped(t *testing.T) {
	dir := t.TempDir()
	lo := 20000 + int(os.Getpid()%5000)*2
	other, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(lo)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// flock's locks belong to the open file, so this one conflicts with
	// choose's as another process's would.
	if err := syscall.Flock(int(other.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	got, err := choose(1, lo, lo+2, dir)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != lo+1 {
		t.Fatalf("got port %d, want %d (the other one's file is locked)", got[0], lo+1)
	}
	if _, err := choose(1, lo, lo+2, dir); err == nil {
		t.Fatal("a port was given again, or a locked one was given")
	}
}
