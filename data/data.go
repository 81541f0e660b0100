// Package data carries out SageMaker's data contract for an attempt of a
// training job: before its program starts, the input channels of
// InputDataConfig are staged from S3 into input/data/<channel> (File mode)
// and the checkpoint directory is filled from CheckpointConfig.S3Uri;
// while it runs, the checkpoint directory is copied to S3 as it changes;
// once it has exited, whatever the exit code, the model directory goes to
// S3OutputPath/<training job name>/output/model.tar.gz and output/data to
// output.tar.gz, and the checkpoints are copied a last time.
//
// Executors call it in one of two ways. A Plan, made by NewPlan from the
// payload, the attempt's identity and the directories, says what to move;
// a Client (NewClient, over the AWS SDK's S3 client and its transfer
// manager) moves it: Stage, Upload, RestoreCheckpoints and
// SaveCheckpoints, each through an FS that writes and reads only beneath
// the job's directory and follows no link. Or an executor wraps the job's
// command with Wrap, and the wrapper (Run, in the qshare binary, with the
// job's own rights) does all of it around the program, so that a download
// counts against the job's run time and a stop reaches it.
//
// Every failure that the job's payload or its data cause is an *Error whose
// Reason is in SageMaker's words ("ClientError: Data download failed: …"),
// for the attempt's status reason; it is never a capacity failure.
package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"qshare"
	"qshare/trainingjob"
)

// The S3DataType, S3DataDistributionType, input mode and compression
// values of a CreateTrainingJob request that qshare reads.
const (
	S3Prefix        = "S3Prefix"
	ManifestFile    = "ManifestFile"
	FullyReplicated = "FullyReplicated"
	ShardedByS3Key  = "ShardedByS3Key"
	FileMode        = "File"
	FastFileMode    = "FastFile"
	PipeMode        = "Pipe"
	GZIP            = "GZIP"
	NoCompression   = "NONE"
)

// Dirs are an attempt's SageMaker directories where the FS given to a
// Client reaches them: absolute paths, as the FS takes them (for the
// process executor, inside the job's directory on the host).
type Dirs struct {
	// Input holds data/<channel> and config/.
	Input      string `json:"input"`
	Model      string `json:"model"`
	OutputData string `json:"outputData"`
	Checkpoint string `json:"checkpoint"`
}

// Channel returns the directory of the channel named name.
func (d Dirs) Channel(name string) string { return path.Join(d.Input, "data", name) }

// Location is a bucket and a key or key prefix.
type Location struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
}

// String returns the location as an s3:// URI.
func (l Location) String() string { return "s3://" + l.Bucket + "/" + l.Key }

// ChannelPlan is what staging one channel does.
type ChannelPlan struct {
	Name string `json:"name"`
	// Type is S3Prefix or ManifestFile; Source the prefix or the manifest.
	Type   string   `json:"type"`
	Source Location `json:"source"`
	// Sharded is true for ShardedByS3Key.
	Sharded bool `json:"sharded,omitempty"`
}

// Plan is everything the transfers of one attempt on one instance need:
// NewPlan makes it from the payload, and it travels as JSON to the
// wrapper (Wrap).
type Plan struct {
	// TrainingJobName is the attempt's: its outputs go under it, so two
	// attempts never overwrite each other.
	TrainingJobName string `json:"trainingJobName"`
	// Instance is this instance's index (from 0) of Instances.
	Instance  int `json:"instance"`
	Instances int `json:"instances"`
	// VolumeBytes bounds what staging may download (VolumeSizeInGB); 0
	// is no bound.
	VolumeBytes int64         `json:"volumeBytes,omitempty"`
	Channels    []ChannelPlan `json:"channels,omitempty"`
	// Output is S3OutputPath/<TrainingJobName>/output, if the payload has
	// an S3OutputPath; Compress is false for CompressionType NONE.
	Output   *Location `json:"output,omitempty"`
	Compress bool      `json:"compress,omitempty"`
	// Checkpoints is CheckpointConfig.S3Uri, if any.
	Checkpoints *Location `json:"checkpoints,omitempty"`
	Dirs        Dirs      `json:"dirs"`
}

// Empty reports whether the plan moves nothing, so that an executor need
// not wrap the job's command.
func (p Plan) Empty() bool {
	return len(p.Channels) == 0 && p.Output == nil && p.Checkpoints == nil
}

// Uploads reports whether the plan uploads anything once the program has
// ended (a model and output, or checkpoints): what a kill must leave time
// for.
func (p Plan) Uploads() bool { return p.Output != nil || p.Checkpoints != nil }

// Attempt is who an attempt is, as the transfers need it.
type Attempt struct {
	// TrainingJobName is the attempt's (the last part of the TrainingJobArn
	// in latestAttempt.serviceResourceId; executor.Spec.TrainingJobName).
	TrainingJobName string
	// Instance is this instance's index (from 0) of Instances (at least 1).
	Instance, Instances int
}

// Validate refuses at submit what no executor can serve: a channel in Pipe
// mode, a FileSystemDataSource, an S3 channel that is neither S3Prefix nor
// ManifestFile, an unknown S3DataDistributionType or CompressionType, and
// an S3 URI that names no bucket. It returns an EINVALID *qshare.Error
// (a ClientException on the wire) that names the member.
func Validate(req *trainingjob.Request) error {
	if req.AlgorithmSpecification.TrainingInputMode == PipeMode {
		return invalid("AlgorithmSpecification.TrainingInputMode is Pipe: qshare serves channels in File mode only (FastFile is served as File); use File")
	}
	for i, c := range req.InputDataConfig {
		field := fmt.Sprintf("InputDataConfig[%d] (channel %q)", i, c.ChannelName)
		if c.InputMode == PipeMode {
			return invalid("%s.InputMode is Pipe: qshare serves channels in File mode only (FastFile is served as File); use File", field)
		}
		if c.DataSource.FileSystemDataSource != nil {
			return invalid("%s.DataSource.FileSystemDataSource is not supported: no qshare executor mounts EFS or FSx; give an S3DataSource", field)
		}
		s := c.DataSource.S3DataSource
		if s == nil || isLocal(s.S3Uri) {
			continue
		}
		switch s.S3DataType {
		case "", S3Prefix, ManifestFile:
		default:
			return invalid("%s.DataSource.S3DataSource.S3DataType is %q: qshare stages S3Prefix and ManifestFile", field, s.S3DataType)
		}
		switch s.S3DataDistributionType {
		case "", FullyReplicated, ShardedByS3Key:
		default:
			return invalid("%s.DataSource.S3DataSource.S3DataDistributionType is %q: give FullyReplicated or ShardedByS3Key", field, s.S3DataDistributionType)
		}
		if _, err := ParseURI(s.S3Uri); err != nil {
			return invalid("%s.DataSource.S3DataSource.S3Uri: %v", field, err)
		}
	}
	if o := req.OutputDataConfig; o != nil {
		switch o.CompressionType {
		case "", GZIP, NoCompression:
		default:
			return invalid("OutputDataConfig.CompressionType is %q: give GZIP or NONE", o.CompressionType)
		}
		if o.S3OutputPath != "" {
			if _, err := ParseURI(o.S3OutputPath); err != nil {
				return invalid("OutputDataConfig.S3OutputPath: %v", err)
			}
		}
	}
	if c := req.CheckpointConfig; c != nil && c.S3Uri != "" {
		if _, err := ParseURI(c.S3Uri); err != nil {
			return invalid("CheckpointConfig.S3Uri: %v", err)
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return qshare.Errorf(qshare.EINVALID, "serviceRequestPayload "+format, args...)
}

// isLocal reports whether uri is a file:// channel, which the process
// executor reads in place.
func isLocal(uri string) bool { return strings.HasPrefix(uri, "file:") }

// ParseURI reads an s3://bucket/key URI. The key may be empty (the whole
// bucket).
func ParseURI(uri string) (Location, error) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "s3" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return Location{}, fmt.Errorf("%q is not an S3 URI: give s3://bucket/prefix", cut(uri))
	}
	return Location{Bucket: u.Host, Key: strings.TrimPrefix(u.Path, "/")}, nil
}

// NewPlan returns the transfers of attempt a for the payload req, into
// the directories d. It fails with an EINVALID *qshare.Error for a payload
// that Validate refuses.
func NewPlan(req *trainingjob.Request, a Attempt, d Dirs) (Plan, error) {
	if err := Validate(req); err != nil {
		return Plan{}, err
	}
	p := Plan{TrainingJobName: a.TrainingJobName, Instance: a.Instance, Instances: max(a.Instances, 1), Dirs: d}
	if p.Instance < 0 || p.Instance >= p.Instances {
		return Plan{}, fmt.Errorf("data: instance %d of %d", a.Instance, a.Instances)
	}
	if gb := req.ResourceConfig.VolumeSizeInGB; gb > 0 {
		p.VolumeBytes = gb << 30
	}
	for _, c := range req.InputDataConfig {
		s := c.DataSource.S3DataSource
		if s == nil || isLocal(s.S3Uri) {
			continue
		}
		loc, _ := ParseURI(s.S3Uri)
		typ := s.S3DataType
		if typ == "" {
			typ = S3Prefix
		}
		p.Channels = append(p.Channels, ChannelPlan{Name: c.ChannelName, Type: typ, Source: loc, Sharded: s.S3DataDistributionType == ShardedByS3Key})
	}
	if o := req.OutputDataConfig; o != nil && o.S3OutputPath != "" {
		if p.TrainingJobName == "" {
			return Plan{}, errors.New("data: the attempt has no training job name to upload its output under")
		}
		loc, _ := ParseURI(o.S3OutputPath)
		loc.Key = joinKey(loc.Key, p.TrainingJobName, "output")
		p.Output, p.Compress = &loc, o.CompressionType != NoCompression
	}
	if c := req.CheckpointConfig; c != nil && c.S3Uri != "" {
		loc, _ := ParseURI(c.S3Uri)
		p.Checkpoints = &loc
	}
	return p, nil
}

// joinKey joins key parts with single slashes, keeping a prefix's own
// form ("" stays the bucket's root).
func joinKey(prefix string, parts ...string) string {
	k := strings.TrimSuffix(prefix, "/")
	for _, p := range parts {
		if k != "" {
			k += "/"
		}
		k += p
	}
	return k
}

// ChannelConfig is one channel of inputdataconfig.json, as SageMaker
// writes it.
type ChannelConfig struct {
	ContentType        string `json:"ContentType,omitempty"`
	TrainingInputMode  string `json:"TrainingInputMode"`
	S3DistributionType string `json:"S3DistributionType"`
	RecordWrapperType  string `json:"RecordWrapperType"`
	CompressionType    string `json:"CompressionType,omitempty"`
}

// InputDataConfig returns inputdataconfig.json for req: for each channel,
// its input mode (FastFile is reported as FastFile, and served as File),
// distribution, record wrapper and content type, as SageMaker writes them.
func InputDataConfig(req *trainingjob.Request) map[string]ChannelConfig {
	out := map[string]ChannelConfig{}
	for _, c := range req.InputDataConfig {
		mode := c.InputMode
		if mode == "" {
			mode = req.AlgorithmSpecification.TrainingInputMode
		}
		if mode == "" {
			mode = FileMode
		}
		dist := FullyReplicated
		if s := c.DataSource.S3DataSource; s != nil && s.S3DataDistributionType != "" {
			dist = s.S3DataDistributionType
		}
		rw := c.RecordWrapperType
		if rw == "" {
			rw = "None"
		}
		cc := ChannelConfig{ContentType: c.ContentType, TrainingInputMode: mode, S3DistributionType: dist, RecordWrapperType: rw}
		if c.CompressionType != "" && c.CompressionType != "None" {
			cc.CompressionType = c.CompressionType
		}
		out[c.ChannelName] = cc
	}
	return out
}

// InputDataConfigJSON is InputDataConfig as the file's bytes.
func InputDataConfigJSON(req *trainingjob.Request) []byte {
	b, _ := json.Marshal(InputDataConfig(req))
	return b
}

func cut(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
