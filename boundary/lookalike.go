package boundary

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Keys that read as toolplane's markers. A model does not compare bytes: to
// a reader, "__DROPPED__", "__dropped__" with a zero-width space inside, and
// "toolplane∕untrusted" with a division slash are the marker and the label.
// So whether a key looks like one is decided on a folded form of the key,
// where case is folded, compatibility forms are decomposed (fullwidth
// letters and solidus, ligatures), combining marks and invisible code
// points are dropped, and punctuation and letters drawn like the ones in
// the markers are mapped onto them.
//
// The folding works rune by rune, so the folded form of "_" + k is "_"
// followed by the folded form of k: that is what keeps the renaming of
// EscapeKey one to one (see reservedFolded).

// LooksLikeMarker reports whether a key reads as one of toolplane's own:
// folded as described above, it is the Dropped marker key, or it begins
// with MetaPrefix. No key of data a model reads does, once Apply has
// shaped it: [EscapeKey] renames them all.
func LooksLikeMarker(k string) bool {
	f := foldKey(k)
	return f == MarkerKey || strings.HasPrefix(f, MetaPrefix)
}

// reservedKey reports whether EscapeKey renames k: its folded form, past
// any number of leading underscores, is MetaPrefix and more, or, past two
// underscores or more, the rest of the marker key. A reserved key with one
// more '_' in front is reserved too, so renaming by that '_' never gives a
// key that is kept as it is.
func reservedKey(k string) bool {
	// The common case: an ASCII key, folded by ASCII case alone.
	rest := strings.TrimLeft(k, "_")
	if underscores := len(k) - len(rest); underscores >= 2 && strings.EqualFold(rest, MarkerKey[2:]) ||
		len(rest) >= len(MetaPrefix) && strings.EqualFold(rest[:len(MetaPrefix)], MetaPrefix) {
		return true
	}
	if ascii(k) {
		return false
	}
	return reservedFolded(foldKey(k))
}

// reservedFolded is reservedKey on a key already folded.
func reservedFolded(f string) bool {
	rest := strings.TrimLeft(f, "_")
	return len(f)-len(rest) >= 2 && rest == MarkerKey[2:] || strings.HasPrefix(rest, MetaPrefix)
}

// ascii reports whether s is all ASCII.
func ascii(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// foldKey answers the folded form of a key: see the top of this file.
func foldKey(k string) string {
	var b strings.Builder
	b.Grow(len(k))
	var buf [utf8.UTFMax * 4]byte
	for _, r := range k {
		if r < utf8.RuneSelf {
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		if ignorable(r) {
			continue
		}
		if m, ok := confusables[r]; ok {
			// Before decomposition: some decompose into something else
			// (the double low line into a space and a combining mark).
			b.WriteRune(m)
			continue
		}
		n := utf8.EncodeRune(buf[:], r)
		for _, d := range string(norm.NFKD.Append(nil, buf[:n]...)) {
			if ignorable(d) || unicode.Is(unicode.Mn, d) {
				continue
			}
			if m, ok := confusables[d]; ok {
				d = m
			}
			b.WriteRune(unicode.ToLower(d))
		}
	}
	return b.String()
}

// ignorable reports whether r is drawn as nothing: the default-ignorable
// code points of Unicode (format characters such as the zero-width space
// and joiner, the byte order mark and the soft hyphen, variation
// selectors, the Hangul fillers, ...). It takes in a little more than the
// Unicode property does (all of Cf); reading one more key as a marker only
// renames it.
func ignorable(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}

// confusables maps code points drawn like the characters of toolplane's
// markers ('_', '/', and the letters of "dropped" and "toolplane") onto
// them, after compatibility decomposition, which already maps the
// fullwidth and small forms. It follows Unicode's confusables data for
// those characters.
var confusables = map[rune]rune{
	// Slashes.
	'\u2215': '/', // division slash
	'\u2044': '/', // fraction slash
	'\u2571': '/', // box drawings light diagonal
	'\u27CB': '/', // mathematical rising diagonal
	'\u29F8': '/', // big solidus
	'\u1735': '/', // Philippine single punctuation
	'\u2CC6': '/', // Coptic capital letter old Coptic esh
	'\u3033': '/', // vertical kana repeat mark upper half
	'\u30CE': '/', // katakana letter no
	'\u31D3': '/', // CJK stroke sp
	'\u4E3F': '/', // CJK ideograph (the Kangxi radical decomposes to it)
	'\u2041': '/', // caret insertion point
	// Low lines.
	'\u02CD': '_', // modifier letter low macron
	'\u07FA': '_', // NKo lajanyalan
	'\u2017': '_', // double low line
	'\u2581': '_', // lower one eighth block
	'\uFF3F': '_', // fullwidth low line (also by decomposition)
	// Letters of "dropped" and "toolplane" from other scripts.
	'\u0430': 'a', '\u03B1': 'a', // Cyrillic a, Greek alpha
	'\u0501': 'd',                // Cyrillic komi de
	'\u0435': 'e', '\u0454': 'e', // Cyrillic ie, ukrainian ie
	'\u04CF': 'l', '\u0406': 'l', '\u0456': 'l', '\u0399': 'l', '\u03B9': 'l', '\u01C0': 'l', // palochka, dotted i's, iota, dental click
	'\u043F': 'n', '\u0578': 'n', // Cyrillic pe, Armenian vo
	'\u043E': 'o', '\u03BF': 'o', '\u0585': 'o', '\u0D20': 'o', // Cyrillic o, Greek omicron, Armenian oh, Malayalam tta
	'\u0440': 'p', '\u03C1': 'p', // Cyrillic er, Greek rho
	'\u0433': 'r',                // Cyrillic ghe
	'\u0442': 't', '\u03C4': 't', // Cyrillic te, Greek tau
}
