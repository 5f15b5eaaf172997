package oauth_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/oauth"
)

func TestParseChallenges(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header string
		want   []oauth.Challenge
	}{
		{"", nil},
		{"Bearer", []oauth.Challenge{{Scheme: "Bearer"}}},
		{
			`Bearer realm="mcp", error="invalid_token", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource"`,
			[]oauth.Challenge{{Scheme: "Bearer", Params: map[string]string{
				"realm": "mcp", "error": "invalid_token",
				"resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource",
			}}},
		},
		{
			`Basic realm="a, b", Bearer scope="read write",error=insufficient_scope`,
			[]oauth.Challenge{
				{Scheme: "Basic", Params: map[string]string{"realm": "a, b"}},
				{Scheme: "Bearer", Params: map[string]string{"scope": "read write", "error": "insufficient_scope"}},
			},
		},
		{
			`Negotiate YII+/==, Bearer REALM = "x\"y\\z" , realm="second"`,
			[]oauth.Challenge{
				{Scheme: "Negotiate", Token68: "YII+/=="},
				{Scheme: "Bearer", Params: map[string]string{"realm": `x"y\z`}},
			},
		},
		{`, ,Bearer ,`, []oauth.Challenge{{Scheme: "Bearer"}}},
		{`Bearer realm="unclosed`, []oauth.Challenge{{Scheme: "Bearer"}}},
		{`Bearer realm="a" "stray"`, []oauth.Challenge{{Scheme: "Bearer", Params: map[string]string{"realm": "a"}}}},
	} {
		if got := oauth.ParseChallenges(tc.header); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseChallenges(%q) = %#v, want %#v", tc.header, got, tc.want)
		}
	}
}

func TestResourceMetadataURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		header, want string
	}{
		{`Bearer resource_metadata="https://a.example.com/prm"`, "https://a.example.com/prm"},
		{`DPoP resource_metadata="https://d.example.com/prm", bearer resource_metadata="https://b.example.com/prm"`, "https://b.example.com/prm"},
		{`DPoP resource_metadata="https://d.example.com/prm"`, "https://d.example.com/prm"},
		{`Bearer realm="x"`, ""},
		{`Bearer resource_metadata=""`, ""},
		{``, ""},
	} {
		got, ok := oauth.ResourceMetadataURL(tc.header)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("ResourceMetadataURL(%q) = %q, %t; want %q", tc.header, got, ok, tc.want)
		}
	}
}

// render writes challenges back as a header, every parameter quoted.
func render(cs []oauth.Challenge) string {
	var parts []string
	for _, c := range cs {
		s := c.Scheme
		if c.Token68 != "" {
			s += " " + c.Token68
		}
		for i, k := range slices.Sorted(maps.Keys(c.Params)) {
			sep := ", "
			if i == 0 {
				sep = " "
			}
			v := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(c.Params[k])
			s += sep + k + `="` + v + `"`
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// FuzzParseChallenges: parsing never fails, and what it answers, written
// back with every value quoted, parses to the same challenges.
func FuzzParseChallenges(f *testing.F) {
	for _, s := range []string{
		`Bearer realm="mcp", resource_metadata="https://x/prm"`,
		`Basic realm="a, b", Bearer scope="read write",error=insufficient_scope`,
		`Negotiate YII+/==, Bearer REALM = "x\"y\\z"`,
		`, ,Bearer ,`,
		`Bearer a=, b=c`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		cs := oauth.ParseChallenges(header)
		again := oauth.ParseChallenges(render(cs))
		if !reflect.DeepEqual(cs, again) {
			t.Errorf("ParseChallenges(%q) = %#v; rendered %q parses to %#v", header, cs, render(cs), again)
		}
	})
}
