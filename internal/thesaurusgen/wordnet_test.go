package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseData(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		line string
		want synset
		err  bool
	}{
		{
			name: "noun, lexical and semantic pointers",
			line: "00002137 03 n 02 abstraction 0 abstract_entity 0 003 @ 00001740 n 0000 + 00692347 v 0101 ~ 00023100 n 0000 | a general concept formed by extracting common features from specific examples  ",
			want: synset{offset: 2137, pos: 'n', words: []word{{"abstraction"}, {"abstract_entity"}}, pointers: []pointer{
				{symbol: "@", offset: 1740, pos: 'n'},
				{symbol: "+", offset: 692347, pos: 'v', src: 1, dst: 1},
				{symbol: "~", offset: 23100, pos: 'n'},
			}},
		},
		{
			name: "verb with frames",
			line: `02284969 40 v 04 refund 0 return 0 repay 0 give_back 0 003 @ 02251761 v 0000 + 13299651 n 0301 + 01121690 n 0302 03 + 08 00 + 14 00 + 15 00 | pay back; "Please refund me my money"  `,
			want: synset{offset: 2284969, pos: 'v', words: []word{{"refund"}, {"return"}, {"repay"}, {"give_back"}}, pointers: []pointer{
				{symbol: "@", offset: 2251761, pos: 'v'},
				{symbol: "+", offset: 13299651, pos: 'n', src: 3, dst: 1},
				{symbol: "+", offset: 1121690, pos: 'n', src: 3, dst: 2},
			}},
		},
		{
			name: "satellite adjective with a position marker",
			line: "00020103 00 s 02 outback(a) 0 remote 0 002 & 00019874 a 0000 + 05085165 n 0202 | inaccessible and sparsely populated;  ",
			want: synset{offset: 20103, pos: 'a', words: []word{{"outback"}, {"remote"}}, pointers: []pointer{
				{symbol: "&", offset: 19874, pos: 'a'},
				{symbol: "+", offset: 5085165, pos: 'n', src: 2, dst: 2},
			}},
		},
		{
			name: "hexadecimal word count",
			line: "00000001 03 n 0a a 0 b 0 c 0 d 0 e 0 f 0 g 0 h 0 i 0 j 0 000 | ten words",
			want: synset{offset: 1, pos: 'n', words: []word{{"a"}, {"b"}, {"c"}, {"d"}, {"e"}, {"f"}, {"g"}, {"h"}, {"i"}, {"j"}}},
		},
		{name: "short", line: "00002137 03 n", err: true},
		{name: "bad type", line: "00002137 03 x 01 abstraction 0 000 | gloss", err: true},
		{name: "pointer list cut", line: "00002137 03 n 01 abstraction 0 002 @ 00001740 n 0000 | gloss", err: true},
		{name: "bad source/target", line: "00002137 03 n 01 abstraction 0 001 + 00001740 n 01 | gloss", err: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseData(c.line)
			if c.err {
				if !errors.Is(err, errFormat) {
					t.Fatalf("parseData = %+v, %v; want errFormat", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("parseData =\n%+v\nwant\n%+v", got, c.want)
			}
		})
	}
}

func TestParseIndex(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		want indexEntry
		err  bool
	}{
		{line: "client n 3 5 @ ~ #m #p ; 3 2 09985075 09984659 03827107  ", want: indexEntry{"client", 'n', []int64{9985075, 9984659, 3827107}}},
		{line: "refund v 1 3 @ ~ + 1 1 02284969  ", want: indexEntry{"refund", 'v', []int64{2284969}}},
		{line: "give_back v 1 1 @ 1 0 02284969", want: indexEntry{"give_back", 'v', []int64{2284969}}},
		{line: "client n 3 5 @ ~ #m #p ; 3 2 09985075 09984659", err: true},
		{line: "client q 1 0 1 0 09985075", err: true},
	}
	for _, c := range cases {
		got, err := parseIndex(c.line)
		if c.err {
			if !errors.Is(err, errFormat) {
				t.Errorf("parseIndex(%q) = %+v, %v; want errFormat", c.line, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseIndex(%q) = %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
}

func TestParseCount(t *testing.T) {
	t.Parallel()
	cases := []struct {
		line string
		want senseCount
		err  bool
	}{
		{line: "customer%1:18:00:: 1 25", want: senseCount{"customer", 'n', 1, 25}},
		{line: "refund%2:40:00:: 1 1", want: senseCount{"refund", 'v', 1, 1}},
		{line: "0%5:00:00:cardinal:00 1 3", want: senseCount{"0", 'a', 1, 3}},
		{line: "refund%1:04:00:: 2", err: true},
		{line: "refund%9:04:00:: 2 1", err: true},
		{line: "refund 2 1", err: true},
		{line: "refund%1:04:00:: 0 1", err: true},
	}
	for _, c := range cases {
		got, err := parseCount(c.line)
		if c.err {
			if !errors.Is(err, errFormat) {
				t.Errorf("parseCount(%q) = %+v, %v; want errFormat", c.line, got, err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("parseCount(%q) = %+v, %v; want %+v", c.line, got, err, c.want)
		}
	}
}

// A small WordNet, in the real files' format: "order" has a frequent
// sense (a command) and a rare one (a religious order), "refund" a verb
// sense with a hypernym and a derived noun.
var tiny = map[string]string{
	"data.noun": `  1 This software and database is being provided to you, the LICENSEE, by
  2 Princeton University under the following license.
00000100 10 n 02 order 0 command 0 001 @ 00000300 n 0000 | an authoritative direction
00000200 14 n 04 order 0 monastic_order 0 Brotherhood 0 fellowship 0 000 | a group of monks
00000300 10 n 01 message 0 000 | what is communicated
00000400 21 n 02 refund 0 reimbursement 0 001 + 00000500 v 0101 | money returned
00000700 03 n 02 case 0 instance 0 000 | an occurrence of something
00000800 06 n 02 case 0 shell 0 000 | a protective covering
00000900 03 n 02 alpha 0 beta 0 002 @ 00000910 n 0000 ~ 00000920 n 0000 | a letter
00000910 03 n 01 gamma 0 001 ~ 00000900 n 0000 | a broader letter
00000920 03 n 01 delta 0 001 @ 00000900 n 0000 | a narrower letter
`,
	"data.verb": `00000500 40 v 03 refund 0 repay 0 give_back 0 002 @ 00000600 v 0000 + 00000400 n 0101 01 + 08 00 | pay back
00000600 40 v 01 pay 0 001 ~ 00000500 v 0000 01 + 08 00 | give money
`,
	"data.adj": "",
	"data.adv": "",
	"index.noun": `order n 2 1 @ 2 1 00000100 00000200
command n 1 1 @ 1 1 00000100
monastic_order n 1 0 1 0 00000200
fellowship n 1 0 1 0 00000200
message n 1 0 1 1 00000300
refund n 1 1 + 1 1 00000400
reimbursement n 1 0 1 1 00000400
case n 2 0 2 0 00000700 00000800
instance n 1 0 1 0 00000700
shell n 1 0 1 0 00000800
alpha n 1 2 @ ~ 1 1 00000900
beta n 1 2 @ ~ 1 1 00000900
gamma n 1 1 ~ 1 1 00000910
delta n 1 1 @ 1 1 00000920
`,
	"index.verb": `refund v 1 2 @ + 1 1 00000500
repay v 1 1 @ 1 1 00000500
give_back v 1 1 @ 1 0 00000500
pay v 1 1 ~ 1 1 00000600
`,
	"index.adj":   "",
	"index.adv":   "",
	"cntlist.rev": "alpha%1:03:00:: 1 60\nbeta%1:03:00:: 1 60\ngamma%1:03:00:: 1 60\ndelta%1:03:00:: 1 60\norder%1:10:00:: 1 40\norder%1:14:00:: 2 1\ncommand%1:10:00:: 1 12\nrefund%2:40:00:: 1 3\npay%2:40:00:: 1 50\n",
}

func TestBuild(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, text := range tiny {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wn, err := load(dir)
	if err != nil {
		t.Fatal(err)
	}
	rel := build(wn)
	weight := func(from, to string) int {
		for _, r := range rel[from] {
			if r.term == to {
				return r.pct
			}
		}
		return 0
	}
	// Analysed terms: "command" stays, "reimbursement" is "reimburs",
	// "message" is "messag", "repay" is "repai".
	if weight("order", "command") == 0 {
		t.Errorf("order: %v, want command (a synonym of its first sense)", rel["order"])
	}
	if w, h := weight("order", "command"), weight("order", "messag"); h == 0 || h >= w {
		t.Errorf("order: command %d, message %d; want the hypernym related, below the synonym", w, h)
	}
	for _, r := range rel["order"] {
		if strings.HasPrefix(r.term, "monast") || strings.HasPrefix(r.term, "brotherhood") {
			t.Errorf("order relates %q: a collocation or a name", r.term)
		}
	}
	if weight("refund", "reimburs") == 0 || weight("refund", "repai") == 0 {
		t.Errorf("refund: %v, want reimburs and repai", rel["refund"])
	}
	if w := weight("pai", "refund"); w == 0 || w > 100*wHyponym {
		t.Errorf("pay->refund %d, want its hyponym related, at most %v", w, 100*wHyponym)
	}
	if w := weight("refund", "pai"); w == 0 || w > 100*wHypernym {
		t.Errorf("refund->pay %d, want its hypernym related, at most %v", w, 100*wHypernym)
	}
	// Equally frequent words: the relation alone decides.
	if s, up, down := weight("alpha", "beta"), weight("alpha", "gamma"), weight("alpha", "delta"); !(s > up && up > down && down > 0) {
		t.Errorf("alpha: synonym %d, hypernym %d, hyponym %d; want them in that order", s, up, down)
	}
	// Untagged senses: WordNet's order alone decides.
	if i, s := weight("case", "instanc"), weight("case", "shell"); s == 0 || s >= i {
		t.Errorf("case: instance %d, shell %d; want the second sense's synonym below the first's", i, s)
	}
	if c, f := weight("order", "command"), weight("order", "fellowship"); f == 0 || f >= c {
		t.Errorf("order: command %d, fellowship %d; want the rare sense's synonym related, below the frequent one's", c, f)
	}
	if _, ok := rel["give"]; ok {
		t.Errorf("give_back, two terms, became a looked-up term: %v", rel["give"])
	}
	for from, rs := range rel {
		if len(rs) > maxRelated {
			t.Errorf("%s: %d related", from, len(rs))
		}
		for i, r := range rs {
			if r.term == from || r.pct < 1 || r.pct > 100 {
				t.Errorf("%s: %v", from, r)
			}
			if i > 0 && rs[i-1].pct < r.pct {
				t.Errorf("%s: not best first: %v", from, rs)
			}
		}
	}
	out := filepath.Join(dir, "out.txt.gz")
	if err := write(out, rel); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(out); err != nil || fi.Size() == 0 {
		t.Fatalf("write: %v, %v", fi, err)
	}
	if _, ok := rel["order"]; !ok {
		t.Errorf("no order in %v", rel)
	}
}
