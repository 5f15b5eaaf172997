// Package discovery finds tools for a caller among those it may call: a
// read model each node keeps current from the registry's changes, searched
// with BM25 over a tool's words (its name, title, description, tags,
// parameters and examples, each field weighted), widened by a thesaurus
// shipped with the binary and, when an operator configures one, an
// embeddings endpoint, then ranked by what else is known of each tool
// (deprecation, health, use).
//
// Authorization comes before ranking: a search is given the tools its
// caller is shown (door.Door.Shown) and nothing else is a candidate. The
// statistics a score is computed from (how many tools hold a word, how
// long a tool's text is on average) are those of the candidates alone, so
// a tool the caller may not call changes no result, count, score or the
// work a search does.
package discovery
