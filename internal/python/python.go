// Package python finds the Python programs that the system tests drive
// qshare with (python3 with boto3, the AWS CLI), once per test binary and
// past any pyenv shim. It is a test harness: no product package imports
// it.
package python

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

var programs sync.Map // name -> func() (string, error)

// Program returns the path of the program name (python3, aws) that PATH
// finds, or exec.LookPath's error. Where that is a pyenv shim, it returns
// the program the shim runs, as `pyenv which NAME` names it (with the same
// choice of version, from the test binary's directory): the shim is a bash
// script that runs pyenv to make that choice at every start, which cost
// about half a second of CPU here, more than a short Python program itself,
// and the tests start Python dozens of times.
func Program(name string) (string, error) {
	f, _ := programs.LoadOrStore(name, sync.OnceValues(func() (string, error) { return resolve(name) }))
	return f.(func() (string, error))()
}

func resolve(name string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil || filepath.Base(filepath.Dir(p)) != "shims" {
		return p, err
	}
	pyenv, err := exec.LookPath("pyenv")
	if err != nil {
		return p, nil
	}
	out, err := exec.Command(pyenv, "which", name).Output()
	if real := strings.TrimSpace(string(out)); err == nil && filepath.IsAbs(real) {
		return real, nil
	}
	return p, nil // the shim itself, which says what it lacks when run
}

var imports sync.Map // python NUL module -> func() bool

// With returns python3 (Program) and whether it can import module; each
// module is tried once per test binary.
func With(module string) (string, bool) {
	py, err := Program("python3")
	if err != nil {
		return "", false
	}
	f, _ := imports.LoadOrStore(py+"\x00"+module, onceImport(py, module))
	return py, f.(func() bool)()
}

// onceImport returns whether the Python py can import module, trying once.
func onceImport(py, module string) func() bool {
	return sync.OnceValue(func() bool { return exec.Command(py, "-c", "import "+module).Run() == nil })
}
