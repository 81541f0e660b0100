package process

import (
	"encoding/json"
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

// writeJSON writes v as JSON to path, replacing what is there: for files
// nobody reads while they are written (the toolkit's files, before the job
// starts).
func writeJSON(fs dataFS, path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fs.WriteFile(path, b, 0o644)
}

// readJSON reads path into v; it returns the os error for a missing file.
func readJSON(fs dataFS, path string, v any) error {
	b, err := fs.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
