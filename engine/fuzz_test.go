package engine

import (
	"testing"

	"pgregory.net/rapid"
)

// FuzzCommands is the property test (TestProperty) driven by the fuzzer
// instead of rapid's random source: a configuration and a command sequence
// (submits, releases, priority changes, limit changes, stops, ticks) are
// decoded from the fuzz input; after every command the engine's decisions
// are compared with the reference model's and every guarantee of rule 9 is
// checked.
//
//	go test ./engine -run '^$' -fuzz FuzzCommands -fuzztime 60s
func FuzzCommands(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x02\x03\x00\x01\x01\x01\x02\x00\x00\x04\x03\x01\x00\x00\x05\x02\x01\x00\x07\x00\x01\x03"))
	f.Fuzz(rapid.MakeFuzz(func(rt *rapid.T) {
		p := newPropRun(rt)
		steps := rapid.IntRange(1, 200).Draw(rt, "steps")
		for i := 0; i < steps; i++ {
			p.step(rt, i)
		}
	}))
}
