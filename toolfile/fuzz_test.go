package toolfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// FuzzLoadDefinition feeds arbitrary bytes to the loader and the
// registration checks: neither may panic, a refusal is always ErrFormat or a
// CheckError, and a definition that loads and passes the checks builds.
func FuzzLoadDefinition(f *testing.F) {
	files, _ := filepath.Glob("../examples/tools/*")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, filepath.Ext(p))
		}
	}
	f.Add([]byte(`{"name":"a.b","input_schema":{"$ref":"#"}}`), ".json")
	f.Add([]byte("apiVersion: toolplatform/v1\nkind: Tool\n"), ".yaml")
	f.Fuzz(func(t *testing.T, data []byte, ext string) {
		d, _, err := Parse(data, ext)
		if err != nil {
			return
		}
		opt := registry.Options{}
		if _, err := registry.Check([]toolplane.Definition{d}, opt); err != nil {
			return
		}
		if _, _, err := registry.Build([]toolplane.Definition{d}, opt); err != nil {
			t.Fatalf("checked definition did not build: %v", err)
		}
	})
}
