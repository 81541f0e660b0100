package process

import (
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/trainingjob"
)

// layout is where one job's files live. Every attempt of the job runs in the
// same directory, so what one attempt leaves (checkpoints, model, output) the
// next one finds.
type layout struct {
	Job        string // <data>/jobs/<jobID>: the working directory
	Input      string // input
	Config     string // input/config
	Model      string // model
	Output     string // output
	OutputData string // output/data
	Checkpoint string // checkpoints, or CheckpointConfig.LocalPath inside the job directory
	// Attempt is <data>/attempts/<attemptID>: the supervisor's files and
	// the log, outside the working directory so the job cannot disturb them.
	// (Earlier versions used attempts/<jobID>/<attemptID>: one directory
	// more to create for every job, and creating directories is what an
	// attempt costs most.)
	Attempt string
}

func jobLayout(dataDir, jobID, attemptID string, req *trainingjob.Request) (layout, error) {
	job := filepath.Join(dataDir, "jobs", jobID)
	ck, err := checkpointRel(req)
	if err != nil {
		return layout{}, err
	}
	return layout{
		Job:        job,
		Input:      filepath.Join(job, "input"),
		Config:     filepath.Join(job, "input", "config"),
		Model:      filepath.Join(job, "model"),
		Output:     filepath.Join(job, "output"),
		OutputData: filepath.Join(job, "output", "data"),
		Checkpoint: filepath.Join(job, ck),
		Attempt:    filepath.Join(dataDir, "attempts", attemptID),
	}, nil
}

// checkpointRel returns the checkpoint directory relative to the job
// directory. SageMaker's LocalPath is an absolute path in the container
// (default /opt/ml/checkpoints); the /opt/ml prefix, like SageMaker's root,
// maps to the job directory.
func checkpointRel(req *trainingjob.Request) (string, error) {
	if req.CheckpointConfig == nil || strings.TrimSpace(req.CheckpointConfig.LocalPath) == "" {
		return "checkpoints", nil
	}
	p := filepath.ToSlash(filepath.Clean("/" + req.CheckpointConfig.LocalPath))
	p = strings.TrimPrefix(p, "/opt/ml")
	p = strings.TrimPrefix(p, "/")
	if p == "" || p == "." || strings.Contains("/"+req.CheckpointConfig.LocalPath+"/", "/../") {
		return "", qshare.Errorf(qshare.EINVALID, "CheckpointConfig.LocalPath %q does not name a directory inside the job directory: give a path such as /opt/ml/checkpoints or checkpoints", req.CheckpointConfig.LocalPath)
	}
	return p, nil
}

// pathComponent checks that an ID can name a directory.
func pathComponent(what, id string) error {
	if id == "" || id == "." || id == ".." || len(id) > 200 || strings.ContainsAny(id, "/\\\x00") {
		return qshare.Errorf(qshare.EINVALID, "executor: %s %q cannot name a directory: use letters, digits, '-' and '_'", what, id)
	}
	return nil
}

// channelPath returns the local directory of a file:// channel, or "" for
// another scheme.
func channelPath(c trainingjob.Channel) (string, error) {
	if c.DataSource.S3DataSource == nil {
		return "", nil
	}
	uri := c.DataSource.S3DataSource.S3Uri
	if !strings.HasPrefix(uri, "file:") {
		return "", nil
	}
	u, err := url.Parse(uri)
	if err != nil || u.Path == "" || !filepath.IsAbs(u.Path) || (u.Host != "" && u.Host != "localhost") {
		return "", qshare.Errorf(qshare.EINVALID, "InputDataConfig channel %q has S3Uri %q: a local channel must be an absolute file:// URI such as file:///data/train", c.ChannelName, uri)
	}
	return u.Path, nil
}

// hpValue is how the SageMaker training toolkit presents a hyperparameter
// in SM_HPS: the value decoded as JSON where it is JSON, else the string.
func hpValue(s string) any {
	var v any
	if json.Unmarshal([]byte(s), &v) == nil {
		return v
	}
	return s
}

// prepare creates the job's directories and the toolkit's files, and
// returns the attempt's environment. base is what the job inherits from the
// server (see jobBaseEnv). Everything is created through fs, so a link that
// an earlier attempt of the job planted in its directory makes prepare fail
// (errLink) instead of writing where it points; with owner set (--run-as),
// the job's directories are given to that user, so that the job can write
// its model, output and checkpoints.
func prepare(fs dataFS, l layout, s executor.Spec, req *trainingjob.Request, gpus []gpu.GPU, base []string, owner *jobUser) ([]string, error) {
	give := func(string) error { return nil }
	if owner != nil {
		// Through a descriptor of the directory, never by name: the
		// job's earlier attempt may have swapped any of these names for a
		// link to a file of root's (see dataFS.Chown).
		give = func(d string) error { return fs.GiveDir(d, int(owner.UID), int(owner.GID), 0o700) }
	}
	// Parents first, so each is one mkdir (an attempt is started often; the
	// structure is known). fresh: input/config was made just now, by us, so
	// nothing is in it yet, and the toolkit's files are created without
	// first removing what an earlier attempt (or the job) left there.
	fresh := false
	// Every directory is the job's user's alone (0700): other jobs' users
	// may not read its files. The toolkit's files are the server's, and
	// readable by the job's user only through its own directory.
	cfgMode := os.FileMode(0o600)
	if owner != nil {
		cfgMode = 0o644
	}
	for _, d := range []string{l.Job, l.Input, l.Config, filepath.Join(l.Input, "data"), l.Model, l.Output, l.OutputData} {
		err := fs.Mkdir(d, 0o700)
		if err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if d == l.Config {
			fresh = err == nil
		}
		if err := give(d); err != nil {
			return nil, err
		}
	}
	// LocalPath may nest; the job directory exists now.
	if err := fs.MkdirBelow(l.Job, l.Checkpoint, 0o700, give); err != nil {
		return nil, err
	}
	if err := give(l.Checkpoint); err != nil {
		return nil, err
	}
	put := func(path string, v any) error { return writeConfig(fs, path, v, cfgMode, fresh) }
	hps := map[string]string{}
	for k, v := range req.HyperParameters {
		hps[k] = v
	}
	if err := put(filepath.Join(l.Config, "hyperparameters.json"), hps); err != nil {
		return nil, err
	}
	typ := ""
	if ts := s.Demand.Types(); len(ts) > 0 {
		typ = ts[0]
	}
	if req.ResourceConfig.InstanceType != "" {
		typ = req.ResourceConfig.InstanceType
	}
	rc := executor.NewResourceConfig("algo-1", typ, []string{"algo-1"}, "lo")
	if err := put(filepath.Join(l.Config, "resourceconfig.json"), rc); err != nil {
		return nil, err
	}
	var channels []string
	chPaths := map[string]string{}
	for _, c := range req.InputDataConfig {
		p, err := channelPath(c)
		if err != nil {
			return nil, err
		}
		channels = append(channels, c.ChannelName)
		if p == "" {
			p = filepath.Join(l.Input, "data", c.ChannelName) // staged there (package data)
		}
		chPaths[c.ChannelName] = p
	}
	if err := put(filepath.Join(l.Config, "inputdataconfig.json"), data.InputDataConfig(req)); err != nil {
		return nil, err
	}

	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		set(k, v)
	}
	keys := make([]string, 0, len(req.Environment))
	for k := range req.Environment {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == SupervisorEnv {
			continue // refused by Validate; never passed, whatever the store holds
		}
		set(k, req.Environment[k])
	}
	// What follows is qshare's and wins over the payload: a job cannot
	// claim GPUs or an identity it was not given.
	hpsJSON := map[string]any{}
	for k, v := range hps {
		hpsJSON[k] = hpValue(v)
		set("SM_HP_"+executor.EnvName(k), v)
	}
	b, _ := json.Marshal(hpsJSON)
	set("SM_HPS", string(b))
	set("SM_MODEL_DIR", l.Model)
	set("SM_OUTPUT_DIR", l.Output)
	set("SM_OUTPUT_DATA_DIR", l.OutputData)
	set("SM_INPUT_DIR", l.Input)
	set("SM_INPUT_CONFIG_DIR", l.Config)
	set("SM_CHECKPOINT_DIR", l.Checkpoint)
	set("SM_CURRENT_HOST", "algo-1")
	set("SM_HOSTS", `["algo-1"]`)
	set("SM_CURRENT_INSTANCE_TYPE", typ)
	set("SM_NUM_GPUS", strconv.Itoa(len(gpus)))
	set("SM_NUM_CPUS", strconv.Itoa(runtime.NumCPU()))
	b, _ = json.Marshal(channels)
	if channels == nil {
		b = []byte("[]")
	}
	set("SM_CHANNELS", string(b))
	for name, p := range chPaths {
		set("SM_CHANNEL_"+executor.EnvName(name), p)
	}
	set("QSHARE_JOB_ID", s.JobID)
	set("QSHARE_JOB_NAME", s.JobName)
	set("QSHARE_ATTEMPT", strconv.Itoa(s.Attempt))
	set("QSHARE_ATTEMPT_ID", s.AttemptID)
	set("QSHARE_JOB_QUEUE", s.Queue)
	set("QSHARE_QUOTA_SHARE", s.Share)
	// The SageMaker SDK's drivers read these, as in SageMaker's container.
	set("TRAINING_JOB_NAME", s.TrainingJobName(req))
	if s.ResourceARN != "" {
		set("TRAINING_JOB_ARN", s.ResourceARN)
	}
	var ids []string
	for _, g := range gpus {
		ids = append(ids, g.UUID)
	}
	set("CUDA_VISIBLE_DEVICES", strings.Join(ids, ","))
	if len(ids) == 0 {
		set("NVIDIA_VISIBLE_DEVICES", "void")
	} else {
		set("NVIDIA_VISIBLE_DEVICES", strings.Join(ids, ","))
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out, nil
}

// validateEnvironment checks the payload's Environment can be passed to a
// process.
func validateEnvironment(req *trainingjob.Request) error {
	for k, v := range req.Environment {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return qshare.Errorf(qshare.EINVALID, "Environment has the variable name %q: a name must be non-empty and hold no '=' or NUL", k)
		}
		if k == SupervisorEnv {
			return qshare.Errorf(qshare.EINVALID, "Environment sets %s, which qshare reserves for its own supervisor: remove it", k)
		}
		if strings.ContainsRune(v, 0) {
			return qshare.Errorf(qshare.EINVALID, "Environment.%s holds a NUL byte, which a process environment cannot carry", k)
		}
	}
	for _, c := range req.InputDataConfig {
		if _, err := channelPath(c); err != nil {
			return err
		}
	}
	return nil
}

// jobRel describes err for the job's owner, who must not learn server
// paths: the path of an fsError is given relative to the job's directory
// ("input/config"), and other errors without their paths.
func jobRel(err error, jobID string) string {
	var fe *fsError
	if errors.As(err, &fe) {
		rel := strings.TrimPrefix(fe.Rel, "jobs/"+jobID+"/")
		if rel == "jobs/"+jobID {
			rel = "the job's directory"
		}
		return rel + ": " + fe.Err.Error()
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	return err.Error()
}

// linkIn says which path of the job's directory a refused link is at, for
// the attempt's reason: "input/config in the job's directory is a link, …".
func linkIn(err error, jobID string) string {
	var fe *fsError
	if !errors.As(err, &fe) {
		return "the job's directory holds a link"
	}
	rel := strings.TrimPrefix(fe.Rel, "jobs/"+jobID+"/")
	if rel == "jobs/"+jobID {
		return "the job's directory " + errLink.Error()
	}
	return rel + " in the job's directory " + errLink.Error()
}
