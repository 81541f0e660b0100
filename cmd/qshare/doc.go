// Command qshare is qshare's one binary: the server (serve), the client
// commands that drive it through the AWS Batch API (apply, submit, jobs,
// shares, ...), the simulator (simulate), and the benchmarks (bench). Its
// files are flag wiring and output; each command calls a package that
// does the work (daemon and api for serve, plan for apply, sim for
// simulate, internal/bench for bench). It is the one product package that
// may import internal/; docs/layout.md has the tree and the rule.
package main
