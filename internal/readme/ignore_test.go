package readme

import (
	"os"
	"os/exec"
	"path"
	"regexp"
	"strings"
	"testing"
)

// writtenRe finds what a README command writes: a redirection to a file,
// a data directory, a file docker cp copies out.
var writtenRe = regexp.MustCompile(`(?:[^0-9&>]>\s*|--data\s+|docker cp \S+\s+)([A-Za-z0-9][A-Za-z0-9._-]*)`)

// Everything the README's commands write beside the checkout (data
// directories holding the first start's keys, files holding tokens and
// webhook URLs) is ignored by git and kept out of a Docker build context,
// at the root and below it: a credentials.env in any data directory too.
func TestFilesTheREADMEWritesAreIgnored(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not on PATH")
	}
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parse(text)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{"toolplane-data/credentials.env": true, "deploy/credentials.env": true}
	for _, b := range blocks {
		for _, m := range writtenRe.FindAllStringSubmatch(b.text, -1) {
			files[m[1]] = true
		}
	}
	for _, want := range []string{"vault-token", "slack-url", "toolplane-data-pg", "toolplane-data.env"} {
		if !files[want] {
			t.Errorf("the README no longer writes %s: update this test", want)
		}
	}
	docker, err := os.ReadFile("../../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	for f := range files {
		cmd := exec.Command("git", "check-ignore", "-q", "--no-index", f)
		cmd.Dir = "../.."
		if err := cmd.Run(); err != nil {
			t.Errorf("git does not ignore %s, which the README writes", f)
		}
		if !dockerIgnores(string(docker), f) {
			t.Errorf(".dockerignore does not keep out %s, which the README writes", f)
		}
	}
}

// dockerIgnores reports whether the .dockerignore patterns exclude name
// (or a directory holding it) from the build context, as Docker reads
// them: each pattern matched from the context's root ("**" any number of
// directories), the last matching pattern deciding ("!" re-includes).
func dockerIgnores(patterns, name string) bool {
	ignored := false
	for _, line := range strings.Split(patterns, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		negate := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/")
		p = strings.TrimSuffix(p, "/")
		if matchesOrHolds(p, name) {
			ignored = !negate
		}
	}
	return ignored
}

// matchesOrHolds reports whether pattern matches name or one of its
// parent directories.
func matchesOrHolds(pattern, name string) bool {
	parts := strings.Split(name, "/")
	for i := 1; i <= len(parts); i++ {
		if globMatch(strings.Split(pattern, "/"), parts[:i]) {
			return true
		}
	}
	return false
}

// globMatch matches path segments against pattern segments, "**" standing
// for any number of segments.
func globMatch(pattern, segs []string) bool {
	if len(pattern) == 0 {
		return len(segs) == 0
	}
	if pattern[0] == "**" {
		for i := 0; i <= len(segs); i++ {
			if globMatch(pattern[1:], segs[i:]) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return false
	}
	ok, _ := path.Match(pattern[0], segs[0])
	return ok && globMatch(pattern[1:], segs[1:])
}
