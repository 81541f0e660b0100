package main

import (
	"context"

	"github.com/spf13/cobra"

	"qshare/internal/bench"
)

func init() {
	opt := bench.S3Options{Objects: 1000, ObjectBytes: 1 << 20, BigBytes: 1 << 30}
	cmd := &cobra.Command{
		Use:   "s3",
		Short: "Staging and uploading with package data against aws s3 sync and cp; a channel's cost at start; the embedded store against versitygw and SeaweedFS",
		Long: `s3 starts qshare's embedded S3 store on a loopback port in this process,
fills a bucket with a channel of --objects objects of --object-bytes each
and one of --big-bytes (random data), and times, against the same store:
staging the channel with package data (the executors' code) and with
"aws s3 sync" (the AWS CLI, where installed); then uploading a model
directory holding one file of --big-bytes as model.tar.gz with package data,
and the file with "aws s3 cp". Each of the four is timed from a sync(2),
so that none pays for the writeback of what the one before wrote. The
objects live in a temporary directory
(--dir to choose), which needs room for three copies of the channel.

Then it starts "qshare serve --executor process" (this binary) and times,
from SubmitServiceJob to the program's first line, five jobs with a channel
of one --object-bytes object in the server's embedded store and five with
none; and it measures PutObject and GetObject (200 objects of
--object-bytes, 8 at a time; 4 of 64 MiB, one at a time) on that embedded
store, on versitygw (.ci/build-versitygw) and on SeaweedFS's S3 gateway
(.ci/build-seaweedfs), each skipped with a note where it is not built,
with the same client and the same objects.`,
		Example: `  qshare bench s3
  qshare bench s3 --objects 200 --big-bytes 268435456 --json`,
		Args: cobra.NoArgs,
		RunE: benchRunE("qshare bench s3", bench.RowsOf(bench.S3Result{}), func(ctx context.Context, _ int) (any, error) {
			return bench.RunS3(ctx, opt)
		}),
	}
	f := cmd.Flags()
	f.IntVar(&opt.Objects, "objects", opt.Objects, "small objects in the channel")
	f.Int64Var(&opt.ObjectBytes, "object-bytes", opt.ObjectBytes, "bytes of each small object")
	f.Int64Var(&opt.BigBytes, "big-bytes", opt.BigBytes, "bytes of the big object, and of the model uploaded")
	f.StringVar(&opt.Dir, "dir", "", "directory for the store and the staged copies (default: a temporary one)")
	benchCmd.AddCommand(cmd)
}
