// Package jobset is the benchmarks' set of running jobs: a job is added
// when the engine starts it and removed when it finishes or is preempted,
// both in constant time, and a job can be drawn by index, at random.
package jobset

// Set holds job IDs in no particular order. Its zero value is empty and
// ready to use.
type Set struct {
	ids []string
	pos map[string]int // index of each job in ids
}

// Len returns the number of jobs in s.
func (s *Set) Len() int { return len(s.ids) }

// At returns the job at index i, 0 ≤ i < Len.
func (s *Set) At(i int) string { return s.ids[i] }

// Add adds id, which must not be in s.
func (s *Set) Add(id string) {
	if s.pos == nil {
		s.pos = map[string]int{}
	}
	s.pos[id] = len(s.ids)
	s.ids = append(s.ids, id)
}

// RemoveAt removes the job at index i (0 ≤ i < Len) and returns it; the
// last job takes its index.
func (s *Set) RemoveAt(i int) string {
	id := s.ids[i]
	last := s.ids[len(s.ids)-1]
	s.ids[i] = last
	s.pos[last] = i
	s.ids = s.ids[:len(s.ids)-1]
	delete(s.pos, id)
	return id
}

// Remove removes id and reports whether it was in s.
func (s *Set) Remove(id string) bool {
	i, ok := s.pos[id]
	if ok {
		s.RemoveAt(i)
	}
	return ok
}
