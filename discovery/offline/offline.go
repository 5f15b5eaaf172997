// Package offline answers the search options every node and the
// evaluation harness use by default: the thesaurus shipped with the
// binary, read on the first search. Nothing here reaches the network.
package offline

import (
	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/discovery/thesaurus"
)

// Options answers discovery options with the shipped thesaurus set.
func Options() discovery.Options {
	return discovery.Options{Thesaurus: thesaurus.Lazy()}
}
