package main

import "qshare/executor/process"

// The process executor runs each attempt under a supervisor: this binary,
// re-executed with process.SupervisorEnv set. It must become the supervisor
// before anything else happens (before cobra parses flags, before a server
// starts), so the check is an init function rather than a subcommand.
func init() { process.MaybeSupervise() }
