package process

import "strings"

// optmlRoot is where SageMaker's containers have their job's directories,
// and where the process executor binds a job's directory in the job's own
// mount namespace (see optml_linux.go) when it runs as root.
const optmlRoot = "/opt/ml"

// namesOptML reports whether the command names a path under /opt/ml, as
// the SageMaker SDK's entry point does: a job that cannot have /opt/ml is
// refused at submit instead of failing when it runs.
// A path that only begins like it (/opt/mlflow/bin/python) is not refused.
func namesOptML(cmd []string) bool {
	for _, a := range cmd {
		for rest := a; ; {
			i := strings.Index(rest, optmlRoot)
			if i < 0 {
				break
			}
			rest = rest[i+len(optmlRoot):]
			if rest == "" || !strings.ContainsAny(rest[:1], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") {
				return true
			}
		}
	}
	return false
}

// optmlPaths rewrites the SM_* variables of env that name a directory of
// job (its directory on the host) to name it under /opt/ml, as the job
// sees it in its mount namespace.
func optmlPaths(env []string, job string) []string {
	out := make([]string, len(env))
	for i, kv := range env {
		out[i] = kv
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "SM_") {
			continue
		}
		if v == job {
			out[i] = k + "=" + optmlRoot
		} else if rest, ok := strings.CutPrefix(v, job+"/"); ok {
			out[i] = k + "=" + optmlRoot + "/" + rest
		}
	}
	return out
}
