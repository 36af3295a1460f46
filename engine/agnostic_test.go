package engine

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// moduleWords are what the engine must not name: the modules and the
// kernel keys and files only a module knows. A module owns its knowledge
// (facts.Set, TargetManager); the engine offers generic operations.
var moduleWords = regexp.MustCompile(`\b(hugepages|pgconf|overcommit|thp|oom)\b|vm\.nr_hugepages|vm\.overcommit_|transparent_hugepage`)

// kernelPaths are the kernel's own names that contain a module's name: the
// per-node huge page directory, the per-size pools' directory and each
// size's hugepages-<kB>kB are core memory facts every module reads.
var kernelPaths = strings.NewReplacer("/hugepages/hugepages-", "", "/sys/kernel/mm/hugepages", "", "hugepages-", "")

// pendingModuleWords are files other branches are moving module knowledge
// out of, with the words left; the test fails as soon as an entry is no
// longer true, so the list can only shrink.
var pendingModuleWords = map[string]int{}

// TestEngineNamesNoModule fails when a non-test file under engine/ names
// a module or a module-specific kernel key, in code or in comments.
func TestEngineNamesNoModule(t *testing.T) {
	found := map[string][]string{}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, w := range moduleWords.FindAllString(kernelPaths.Replace(line), -1) {
				found[p] = append(found[p], p+":"+strconv.Itoa(i+1)+": "+w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, 0, len(found))
	for f := range found {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, f := range files {
		if _, ok := pendingModuleWords[f]; ok {
			continue
		}
		t.Errorf("engine/%s names modules or their keys:\n\t%s", f, strings.Join(found[f], "\n\t"))
	}
	for f, n := range pendingModuleWords {
		if len(found[f]) != n {
			t.Errorf("engine/%s: %d module words, pendingModuleWords expects %d: update the list", f, len(found[f]), n)
		}
	}
}
