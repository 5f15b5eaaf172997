package connection

import (
	"slices"
	"testing"
)

func TestMissingScopes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		wanted, granted, want []string
	}{
		{nil, nil, nil},
		{[]string{"a"}, []string{"a", "b"}, nil},
		{[]string{"c", "a", "b"}, []string{"a"}, []string{"c", "b"}},
		{[]string{"a"}, nil, []string{"a"}},
		// An application's scopes are listed as it was configured, each
		// one the grant lacks named in the message as configured.
		{[]string{"c", "a", "c"}, []string{"a"}, []string{"c", "c"}},
	} {
		if got := missingScopes(tc.wanted, tc.granted); !slices.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("missingScopes(%v, %v) = %v, want %v", tc.wanted, tc.granted, got, tc.want)
		}
	}
}
