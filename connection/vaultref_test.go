package connection

import (
	"net/url"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// FuzzCheckVaultRef holds the grammar of a Vault reference to its
// promise: what it accepts is bounded, starts with no '/', holds no '..'
// and no segment Vault would read as another entry, and reaches Vault
// as written (nothing in it is escaped in a URL's path).
func FuzzCheckVaultRef(f *testing.F) {
	for _, seed := range [][2]string{
		{"secret", "crm/api"}, {"kv/team-a", "a@b=d~e+f"}, {"secret", "/crm"}, {"secret", "crm/../x"},
		{"secret", "crm//x"}, {"secret/", "x"}, {"secret", "a/./b"}, {"secret", "%2e%2e"}, {"", "x"},
		{"secret", "a?b#c"}, {"secret", "ü"}, {"secret", strings.Repeat("a", 600)},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, mount, path string) {
		err := checkVaultRef(toolplane.VaultRef{Mount: mount, Path: path})
		if err != nil {
			if _, ok := err.(*InvalidError); !ok {
				t.Fatalf("refusal %T is not an *InvalidError", err)
			}
			return
		}
		for _, part := range []struct {
			v   string
			max int
		}{{mount, maxVaultMount}, {path, maxVaultPath}} {
			if part.v == "" || len(part.v) > part.max || strings.HasPrefix(part.v, "/") || strings.Contains(part.v, "..") {
				t.Fatalf("accepted %q/%q", mount, path)
			}
			for seg := range strings.SplitSeq(part.v, "/") {
				if seg == "" || seg == "." || url.PathEscape(seg) != seg {
					t.Fatalf("accepted %q/%q with segment %q", mount, path, seg)
				}
			}
		}
	})
}
