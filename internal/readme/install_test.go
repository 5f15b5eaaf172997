package readme

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goInstallRe finds a go install command and what it installs.
var goInstallRe = regexp.MustCompile("go install ([^\\s`]+)")

// Every install command the README gives works from a clone: a go
// install in a sh block names a package of the checkout (./...), never
// the module path, which the module proxy does not serve until the
// module is published; the module path appears only in prose that says
// so. Unless -short, the command given is run, into a directory of the
// test's own, and the binary it installs answers `version`.
func TestInstallFromAClone(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := parse(text)
	if err != nil {
		t.Fatal(err)
	}
	var local []string
	for _, b := range blocks {
		for _, m := range goInstallRe.FindAllStringSubmatch(b.text, -1) {
			if !strings.HasPrefix(m[1], "./") {
				t.Errorf("README.md:%d: %q installs the module path, which works only once the module is published; give the clone's ./cmd/toolplane", b.line, m[0])
				continue
			}
			local = append(local, m[1])
		}
	}
	if len(local) == 0 {
		t.Fatal("the README gives no go install command that works from a clone")
	}
	for _, para := range strings.Split(string(text), "\n\n") {
		if strings.Contains(para, "```") {
			continue
		}
		for _, m := range goInstallRe.FindAllStringSubmatch(para, -1) {
			if !strings.HasPrefix(m[1], "./") && !strings.Contains(m[1], "…") && !strings.Contains(para, "not published") {
				t.Errorf("README.md: %q is given without saying the module is not published yet:\n%s", m[0], para)
			}
		}
	}
	if testing.Short() {
		return
	}
	bin := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "install", local[0])
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "GOBIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", local[0], err, out)
	}
	out, err := exec.CommandContext(t.Context(), filepath.Join(bin, "toolplane"), "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "toolplane") {
		t.Fatalf("the installed binary: %v %s", err, out)
	}
}
