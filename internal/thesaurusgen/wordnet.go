package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// errFormat: a line of a WordNet file is not in the documented format
// (wndb(5WN), senseidx(5WN)).
var errFormat = errors.New("wordnet: malformed line")

// word is one word of a synset: its lemma as WordNet writes it
// ("give_back", "Christ"), adjective markers such as "(a)" removed.
type word struct {
	lemma string
}

// pointer is one relation a synset holds to another. Src and Dst are
// the 1-based word numbers of a lexical pointer (one word to one word,
// such as a derivationally related form); both 0 for a semantic pointer
// (synset to synset).
type pointer struct {
	symbol   string
	offset   int64
	pos      byte
	src, dst int
}

// synset is one line of a data.* file.
type synset struct {
	offset   int64
	pos      byte // n, v, a, r (satellite adjectives, s, are read as a)
	words    []word
	pointers []pointer
}

// parseData parses one line of a data.* file:
//
//	offset lex_filenum ss_type w_cnt word lex_id [word lex_id...] p_cnt [ptr...] [frames...] | gloss
//
// w_cnt and lex_id are hexadecimal, p_cnt decimal, and each pointer is
// "symbol offset pos source/target" with source/target four hexadecimal
// digits. Lines of the licence header begin with two spaces; the caller
// skips them.
func parseData(line string) (synset, error) {
	if i := strings.Index(line, " | "); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) < 6 {
		return synset{}, fmt.Errorf("%w: %d fields", errFormat, len(f))
	}
	var s synset
	var err error
	if s.offset, err = strconv.ParseInt(f[0], 10, 64); err != nil {
		return synset{}, fmt.Errorf("%w: offset %q", errFormat, f[0])
	}
	s.pos = normPOS(f[2])
	if s.pos == 0 {
		return synset{}, fmt.Errorf("%w: ss_type %q", errFormat, f[2])
	}
	n, err := strconv.ParseInt(f[3], 16, 32)
	if err != nil || n < 1 {
		return synset{}, fmt.Errorf("%w: w_cnt %q", errFormat, f[3])
	}
	i := 4
	for range n {
		if i+1 >= len(f) {
			return synset{}, fmt.Errorf("%w: short word list", errFormat)
		}
		lemma := f[i]
		if j := strings.IndexByte(lemma, '('); j > 0 && strings.HasSuffix(lemma, ")") {
			lemma = lemma[:j] // adjective position marker: "(a)", "(p)", "(ip)"
		}
		s.words = append(s.words, word{lemma: lemma})
		i += 2
	}
	if i >= len(f) {
		return synset{}, fmt.Errorf("%w: no p_cnt", errFormat)
	}
	p, err := strconv.Atoi(f[i])
	if err != nil || p < 0 {
		return synset{}, fmt.Errorf("%w: p_cnt %q", errFormat, f[i])
	}
	i++
	for range p {
		if i+3 >= len(f) {
			return synset{}, fmt.Errorf("%w: short pointer list", errFormat)
		}
		off, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return synset{}, fmt.Errorf("%w: pointer offset %q", errFormat, f[i+1])
		}
		st, err := strconv.ParseUint(f[i+3], 16, 16)
		if err != nil || len(f[i+3]) != 4 {
			return synset{}, fmt.Errorf("%w: source/target %q", errFormat, f[i+3])
		}
		pos := normPOS(f[i+2])
		if pos == 0 {
			return synset{}, fmt.Errorf("%w: pointer pos %q", errFormat, f[i+2])
		}
		s.pointers = append(s.pointers, pointer{
			symbol: f[i], offset: off, pos: pos,
			src: int(st >> 8), dst: int(st & 0xff),
		})
		i += 4
	}
	return s, nil
}

// indexEntry is one line of an index.* file: a lemma's senses in one part
// of speech, most frequent first.
type indexEntry struct {
	lemma   string
	pos     byte
	offsets []int64
}

// parseIndex parses one line of an index.* file:
//
//	lemma pos synset_cnt p_cnt [ptr_symbol...] sense_cnt tagsense_cnt synset_offset [synset_offset...]
//
// The offsets are in WordNet's sense order, which is by frequency in the
// tagged corpora.
func parseIndex(line string) (indexEntry, error) {
	f := strings.Fields(line)
	if len(f) < 6 {
		return indexEntry{}, fmt.Errorf("%w: %d fields", errFormat, len(f))
	}
	e := indexEntry{lemma: f[0], pos: normPOS(f[1])}
	if e.pos == 0 {
		return indexEntry{}, fmt.Errorf("%w: pos %q", errFormat, f[1])
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 1 {
		return indexEntry{}, fmt.Errorf("%w: synset_cnt %q", errFormat, f[2])
	}
	p, err := strconv.Atoi(f[3])
	if err != nil || p < 0 {
		return indexEntry{}, fmt.Errorf("%w: p_cnt %q", errFormat, f[3])
	}
	i := 4 + p + 2 // pointer symbols, sense_cnt, tagsense_cnt
	if len(f) != i+n {
		return indexEntry{}, fmt.Errorf("%w: %d offsets for synset_cnt %d", errFormat, len(f)-i, n)
	}
	for _, s := range f[i:] {
		off, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return indexEntry{}, fmt.Errorf("%w: offset %q", errFormat, s)
		}
		e.offsets = append(e.offsets, off)
	}
	return e, nil
}

// senseCount is one line of cntlist.rev: how often a lemma's sense was
// tagged in the semantic concordances.
type senseCount struct {
	lemma string
	pos   byte
	sense int // 1-based, WordNet's sense number
	count int
}

// parseCount parses one line of cntlist.rev:
//
//	lemma%ss_type:lex_filenum:lex_id:head_word:head_id sense_number tag_cnt
func parseCount(line string) (senseCount, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return senseCount{}, fmt.Errorf("%w: %d fields", errFormat, len(f))
	}
	lemma, key, ok := strings.Cut(f[0], "%")
	if !ok || key == "" {
		return senseCount{}, fmt.Errorf("%w: sense key %q", errFormat, f[0])
	}
	var c senseCount
	c.lemma = lemma
	switch key[0] {
	case '1':
		c.pos = 'n'
	case '2':
		c.pos = 'v'
	case '3', '5':
		c.pos = 'a'
	case '4':
		c.pos = 'r'
	default:
		return senseCount{}, fmt.Errorf("%w: ss_type in %q", errFormat, f[0])
	}
	var err error
	if c.sense, err = strconv.Atoi(f[1]); err != nil || c.sense < 1 {
		return senseCount{}, fmt.Errorf("%w: sense number %q", errFormat, f[1])
	}
	if c.count, err = strconv.Atoi(f[2]); err != nil || c.count < 0 {
		return senseCount{}, fmt.Errorf("%w: tag count %q", errFormat, f[2])
	}
	return c, nil
}

// normPOS maps a WordNet part of speech to n, v, a or r; satellite
// adjectives (s) are adjectives. 0 when it is none of them.
func normPOS(s string) byte {
	if len(s) != 1 {
		return 0
	}
	switch s[0] {
	case 'n', 'v', 'a', 'r':
		return s[0]
	case 's':
		return 'a'
	}
	return 0
}

// eachLine calls fn with each line of r that is not part of a WordNet
// file's licence header (lines beginning with a space).
func eachLine(r io.Reader, fn func(line string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if line == "" || line[0] == ' ' {
			continue
		}
		if err := fn(line); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
	}
	return sc.Err()
}
