package freeport

import (
	"net"
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
	// A pair whose second port nothing binds now, nor this process was
	// given (by an earlier run of this test, under -count): the other
	// test processes on the machine take theirs from the same range (a
	// server on lo+1 failed this test once in a whole run).
	lo := 20000 + int(os.Getpid()%5000)*2
	for tries := 0; ; tries, lo = tries+1, lo+2 {
		if tries == 100 {
			t.Fatalf("no free port pair from %d on", lo-200)
		}
		mu.Lock()
		_, mine := taken[lo+1]
		mu.Unlock()
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(lo+1)); err == nil && !mine {
			l.Close()
			break
		} else if err == nil {
			l.Close()
		}
	}
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
