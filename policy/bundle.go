package policy

import (
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// maxBundleFile bounds one file of a bundle: rules and test tables are
// text a person writes, never megabytes.
const maxBundleFile = 1 << 20

// ReadBundle reads a bundle's files from a directory tree, keyed by their
// slash-separated path inside it, the form Engine.Compile takes. Hidden
// files and directories (.git) are skipped.
func ReadBundle(fsys fs.FS) (map[string]string, error) {
	files := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if name != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() > maxBundleFile {
			return &BundleError{File: name, Msg: fmt.Sprintf("%d bytes is over the %d a bundle file may hold", info.Size(), maxBundleFile)}
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		files[name] = string(b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	return files, nil
}

// ReadBundleDir is ReadBundle of a directory on disk.
func ReadBundleDir(dir string) (map[string]string, error) {
	return ReadBundle(os.DirFS(dir))
}
