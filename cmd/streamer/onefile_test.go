package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTypeNameInOneFile: nothing outside a model type's own file switches
// on its name. The quoted name of every registered type appears in at most
// two non-test Go files of the repository: the type's file and the
// registry's assembly (which registers by constructor, so in practice one).
func TestTypeNameInOneFile(t *testing.T) {
	files := map[string][]string{}
	types := newModelTypes()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range types.Names() {
			if strings.Contains(string(b), `"`+name+`"`) {
				files[name] = append(files[name], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range types.Names() {
		if len(files[name]) == 0 || len(files[name]) > 2 {
			t.Errorf("type %q appears quoted in %d non-test Go files: %v", name, len(files[name]), files[name])
		}
	}
}
