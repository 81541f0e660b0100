package container

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// ScratchFile is a file of an image made by ImportScratch.
type ScratchFile struct {
	Name string // its path in the image, without the leading slash
	Mode int64
	Data []byte
}

// ImportScratch gives the engine a FROM-scratch image ref holding files and
// the directories a read-only root needs (/tmp, /opt/ml, /etc, /proc, /sys,
// /dev), imported from a tarball (docker import: no registry, no build),
// unless the engine has ref already. The tests' image and the benchmark's
// are made so.
func ImportScratch(ctx context.Context, cli *client.Client, ref string, files []ScratchFile) error {
	if _, err := cli.ImageInspect(ctx, ref); err == nil {
		return nil
	}
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, d := range []string{"tmp/", "opt/", "opt/ml/", "etc/", "proc/", "sys/", "dev/"} {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: time.Unix(0, 0)})
	}
	for _, f := range files {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: time.Unix(0, 0)})
		tw.Write(f.Data)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &b, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		return fmt.Errorf("importing the image %s: %w", ref, err)
	}
	var out bytes.Buffer
	out.ReadFrom(res)
	res.Close()
	if _, err := cli.ImageInspect(ctx, ref); err != nil {
		return fmt.Errorf("the imported image %s is not there (%v): the engine said %s", ref, err, strings.TrimSpace(out.String()))
	}
	return nil
}
