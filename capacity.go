package qshare

import (
	"fmt"
	"sort"
	"strings"
)

// Capacity maps an instance type (a capacity unit such as ml.g5.xlarge) to a
// number of instances. A missing type means zero.
type Capacity map[string]int64

// Types returns the instance types of c with a non-zero count, sorted.
func (c Capacity) Types() []string {
	ts := make([]string, 0, len(c))
	for t, n := range c {
		if n != 0 {
			ts = append(ts, t)
		}
	}
	sort.Strings(ts)
	return ts
}

// Total returns the sum of the counts of every type.
func (c Capacity) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Clone returns a copy of c.
func (c Capacity) Clone() Capacity {
	out := make(Capacity, len(c))
	for t, n := range c {
		out[t] = n
	}
	return out
}

// Add adds d to c in place.
func (c Capacity) Add(d Capacity) {
	for t, n := range d {
		c[t] += n
	}
}

// String renders c as "2×ml.g5.xlarge+1×ml.p4d.24xlarge", types sorted.
func (c Capacity) String() string {
	var b strings.Builder
	for i, t := range c.Types() {
		if i > 0 {
			b.WriteByte('+')
		}
		fmt.Fprintf(&b, "%d×%s", c[t], t)
	}
	if b.Len() == 0 {
		return "0"
	}
	return b.String()
}
