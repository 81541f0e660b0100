package process

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
)

// writeJSONAtomic writes v as JSON to path so that a reader sees either the
// old file or the whole new one: a temporary file in the same directory,
// then a rename (which replaces a link planted at path, never writes
// through it).
func writeJSONAtomic(fs dataFS, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFileAtomic(fs, path, b)
}

func writeFileAtomic(fs dataFS, path string, b []byte) error {
	f, err := fs.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		fs.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		fs.Remove(f.Name())
		return err
	}
	if err := fs.Rename(f.Name(), path); err != nil {
		fs.Remove(f.Name())
		return err
	}
	return nil
}

// writeConfig writes v as JSON to path (with mode), one of the toolkit's files, before
// the job starts. In a directory that the caller has just created (fresh),
// the file is created exclusively: nothing can be there to remove, and if
// something is all the same, it is replaced as WriteFile does. Otherwise
// (a later attempt of the job) a file that already holds exactly this
// content, as a plain file of its own, is left as it is: writing it again
// would cost a removal and a new inode for the same bytes.
func writeConfig(fs dataFS, path string, v any, mode os.FileMode, fresh bool) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if fresh {
		if err := fs.CreateFile(path, b, mode); err == nil || !errors.Is(err, os.ErrExist) {
			return err
		}
	} else if fs.Holds(path, b) {
		return nil
	}
	return fs.WriteFile(path, b, mode)
}

// readJSON reads path into v; it returns the os error for a missing file.
func readJSON(fs dataFS, path string, v any) error {
	b, err := fs.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
