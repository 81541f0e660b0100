package jobset

import (
	"slices"
	"testing"
)

func TestSet(t *testing.T) {
	var s Set
	for _, id := range []string{"a", "b", "c", "d"} {
		s.Add(id)
	}
	if s.At(1) != "b" {
		t.Fatalf("At(1) = %q, want b", s.At(1))
	}
	if got := s.RemoveAt(1); got != "b" {
		t.Fatalf("RemoveAt(1) = %q, want b", got)
	}
	if !s.Remove("a") || s.Remove("a") || s.Remove("x") {
		t.Fatal("Remove reports a job that is not there, or misses one that is")
	}
	var left []string
	for s.Len() > 0 {
		left = append(left, s.RemoveAt(s.Len()-1))
	}
	slices.Sort(left)
	if !slices.Equal(left, []string{"c", "d"}) {
		t.Fatalf("left %v, want [c d]", left)
	}
}
