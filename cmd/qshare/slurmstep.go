package main

import "qshare/executor/slurm"

// The Slurm executor's batch jobs run this binary on each node as the step
// runner (slurm.StepArg as the first argument); like the supervisor, it
// must take over before cobra parses anything.
func init() { slurm.MaybeStep() }
