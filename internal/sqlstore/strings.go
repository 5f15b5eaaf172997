package sqlstore

import (
	"encoding/json"
	"fmt"
)

// JoinStrings is how a column holds a short list of strings: a JSON array,
// or "" for none, so a match on one value is a LIKE on its quoted form and
// every dialect stores the same text.
func JoinStrings(vs []string) string {
	if len(vs) == 0 {
		return ""
	}
	b, err := json.Marshal(vs)
	if err != nil { // strings always encode
		panic(err)
	}
	return string(b)
}

// SplitStrings reads what JoinStrings stored. A list stored in another
// form than JoinStrings writes (the same strings with other escapes or
// spaces) is read as its stored text, one string: a query matches the
// stored text, so a row rewritten into a form that hides it from a filter
// must not read back as the list it was, whose audit digest still holds.
func SplitStrings(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var vs []string
	if err := json.Unmarshal([]byte(s), &vs); err != nil {
		return nil, fmt.Errorf("stored string list %q: %w", s, err)
	}
	if JoinStrings(vs) != s {
		return []string{s}, nil
	}
	return vs, nil
}
