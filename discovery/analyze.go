package discovery

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	bleveunicode "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
	"golang.org/x/text/unicode/norm"
)

// MaxQueryBytes bounds the text of a query that is analysed: a longer one
// is cut (at a rune boundary) before anything reads it, so a 100 KB query
// costs what a 1 KB one does.
const MaxQueryBytes = 1024

// maxQueryTerms bounds the distinct words of a query that are scored.
const maxQueryTerms = 32

// analyzer is bleve's English chain (Unicode word boundaries, lower case,
// possessives, stop words, Porter's stemmer) with two steps before it that
// tool text needs: names written platform.verb_object or camelCase are
// split into their words, and text is folded to NFKC with the common
// Latin look-alikes of other scripts mapped to Latin, so a query typed
// with a Cyrillic "е" finds what the Latin one does.
type analyzer struct {
	tok       analysis.Tokenizer
	lower     analysis.TokenFilter
	possess   analysis.TokenFilter
	stopWords analysis.TokenFilter
	stem      analysis.TokenFilter
}

var std = newAnalyzer()

func newAnalyzer() *analyzer {
	stops := analysis.NewTokenMap()
	if err := stops.LoadBytes(en.EnglishStopWords); err != nil {
		panic("discovery: bleve's English stop words: " + err.Error())
	}
	return &analyzer{
		tok:       bleveunicode.NewUnicodeTokenizer(),
		lower:     lowercase.NewLowerCaseFilter(),
		possess:   en.NewPossessiveFilter(),
		stopWords: stop.NewStopTokensFilter(stops),
		stem:      porter.NewPorterStemmer(),
	}
}

// Terms answers the analysed words of text, in order, stop words
// dropped: the form the index stores and a query is matched in. The
// thesaurus is keyed by it too.
func Terms(text string) []string { return std.terms(text, false) }

// Words answers the words of text before stemming, lower case, stop words
// dropped: what the thesaurus is looked up by beside the stems.
func Words(text string) []string { return std.terms(text, true) }

// termsAndWords answers the analysed words of text and, beside each, the
// word as written (lower case): the stem for the index, the word for the
// word vectors.
func termsAndWords(text string) (terms, words []string) {
	a := std
	stream := a.tok.Tokenize([]byte(prepare(text)))
	stream = a.lower.Filter(stream)
	stream = a.possess.Filter(stream)
	stream = a.stopWords.Filter(stream)
	for _, t := range stream {
		if len(t.Term) > 0 {
			words = append(words, string(t.Term))
		}
	}
	stream = a.stem.Filter(stream)
	for _, t := range stream {
		if len(t.Term) > 0 {
			terms = append(terms, string(t.Term))
		}
	}
	if len(terms) != len(words) {
		// The stemmer keeps every token; were it ever to drop one, the
		// words would not line up, and are not read.
		words = terms
	}
	return terms, words
}

func (a *analyzer) terms(text string, surface bool) []string {
	stream := a.tok.Tokenize([]byte(prepare(text)))
	stream = a.lower.Filter(stream)
	stream = a.possess.Filter(stream)
	stream = a.stopWords.Filter(stream)
	if !surface {
		stream = a.stem.Filter(stream)
	}
	out := make([]string, 0, len(stream))
	for _, t := range stream {
		if len(t.Term) == 0 {
			continue
		}
		out = append(out, string(t.Term))
	}
	return out
}

// prepare folds text to the form the tokenizer reads: NFKC, look-alikes
// of other scripts mapped to Latin, and identifier separators (., _, -,
// /, :) and camelCase boundaries turned into spaces.
func prepare(text string) string {
	text = norm.NFKC.String(text)
	var b strings.Builder
	b.Grow(len(text) + 8)
	var prev rune
	for i, r := range text {
		if m, ok := confusable[r]; ok {
			r = m
		}
		switch {
		case r == '-' && oneLetter(text, i):
			// e-mail, e-commerce: a lone letter's hyphen joins, so the
			// word reads as it does unhyphenated.
			continue
		case r == '_' || r == '.' || r == '-' || r == '/' || r == ':' || r == '@' || r == '#':
			b.WriteByte(' ')
			prev = ' '
			continue
		case unicode.IsUpper(r) && unicode.IsLower(prev):
			// refundOrder: a new word begins.
			b.WriteByte(' ')
		case unicode.IsUpper(r) && unicode.IsUpper(prev) && i+utf8.RuneLen(r) < len(text):
			// HTTPServer: the last capital before a lower-case letter
			// begins a word.
			next, _ := utf8.DecodeRuneInString(text[i+utf8.RuneLen(r):])
			if unicode.IsLower(next) {
				b.WriteByte(' ')
			}
		}
		b.WriteRune(r)
		prev = r
	}
	return b.String()
}

// oneLetter reports whether the hyphen at i follows a word of one letter
// and comes before a letter.
func oneLetter(text string, i int) bool {
	before, n := utf8.DecodeLastRuneInString(text[:i])
	if n == 0 || !unicode.IsLetter(before) {
		return false
	}
	if p, m := utf8.DecodeLastRuneInString(text[:i-n]); m > 0 && (unicode.IsLetter(p) || unicode.IsDigit(p)) {
		return false
	}
	after, _ := utf8.DecodeRuneInString(text[i+1:])
	return unicode.IsLetter(after)
}

// confusable maps the Cyrillic and Greek letters that look like Latin ones
// to the Latin letter (the common part of Unicode's confusables list).
var confusable = map[rune]rune{
	'а': 'a', 'в': 'b', 'е': 'e', 'ё': 'e', 'к': 'k', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'с': 'c', 'т': 't', 'у': 'y', 'х': 'x',
	'і': 'i', 'ј': 'j', 'ѕ': 's', 'ԁ': 'd', 'ԛ': 'q', 'ԝ': 'w', 'ү': 'y', 'һ': 'h',
	'А': 'A', 'В': 'B', 'Е': 'E', 'К': 'K', 'М': 'M', 'Н': 'H', 'О': 'O', 'Р': 'P', 'С': 'C', 'Т': 'T', 'Х': 'X', 'І': 'I', 'Ј': 'J', 'Ѕ': 'S',
	'α': 'a', 'ο': 'o', 'ν': 'v', 'ρ': 'p', 'τ': 't', 'υ': 'u', 'ι': 'i', 'κ': 'k', 'χ': 'x',
	'Α': 'A', 'Β': 'B', 'Ε': 'E', 'Ζ': 'Z', 'Η': 'H', 'Ι': 'I', 'Κ': 'K', 'Μ': 'M', 'Ν': 'N', 'Ο': 'O', 'Ρ': 'P', 'Τ': 'T', 'Υ': 'Y', 'Χ': 'X',
}

// clip cuts a query to MaxQueryBytes at a rune boundary.
func clip(q string) string {
	if len(q) <= MaxQueryBytes {
		return q
	}
	q = q[:MaxQueryBytes]
	for len(q) > 0 && !utf8.ValidString(q) {
		q = q[:len(q)-1]
	}
	return q
}
