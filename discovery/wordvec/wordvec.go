// Package wordvec holds the word vectors shipped with the binary: the
// 50,000 most frequent English words of GloVe's 100-dimensional vectors
// (and the operations words of the domain thesaurus), one signed byte a
// dimension. Search averages them over a query's words and over a tool's
// to tell how close two texts are in meaning when they share no word, the
// offline stand-in for an embeddings model. The data is read on first use;
// internal/wordvecgen writes it.
package wordvec

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"
)

//go:embed glove.bin.gz
var data []byte

// Vectors is a table of word vectors.
type Vectors struct {
	dim   int
	index map[string]int32
	vec   []int8
	// weight is each word's weight in an average: how much the word
	// says, from its frequency rank (see sif).
	weight []float32
}

// Default answers the shipped vectors, read on the first call.
func Default() *Vectors { return loadDefault() }

var loadDefault = sync.OnceValue(func() *Vectors {
	v, err := Read(bytes.NewReader(data))
	if err != nil {
		// The data is part of the build; its test reads it.
		panic(fmt.Sprintf("wordvec: embedded vectors: %v", err))
	}
	return v
})

// Read reads vectors in internal/wordvecgen's format (gzip: the
// dimensions as a little-endian uint16, then per word its frequency rank
// as a uvarint, its length as a byte, its bytes and its dimensions as
// signed bytes).
func Read(r io.Reader) (*Vectors, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(zr, 1<<16)
	var dim uint16
	if err := binary.Read(br, binary.LittleEndian, &dim); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	if dim == 0 || dim > 1024 {
		return nil, fmt.Errorf("%d dimensions", dim)
	}
	v := &Vectors{dim: int(dim), index: make(map[string]int32, 52000)}
	word := make([]byte, 0, 64)
	buf := make([]byte, dim)
	for {
		rank, err := binary.ReadUvarint(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("word %d: %w", len(v.weight), err)
		}
		n, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("word %d: %w", len(v.weight), err)
		}
		word = word[:n]
		if _, err := io.ReadFull(br, word); err != nil {
			return nil, fmt.Errorf("word %d: %w", len(v.weight), err)
		}
		if _, err := io.ReadFull(br, buf); err != nil {
			return nil, fmt.Errorf("word %q: %w", word, err)
		}
		v.index[string(word)] = int32(len(v.weight))
		for _, b := range buf {
			v.vec = append(v.vec, int8(b))
		}
		v.weight = append(v.weight, sif(rank))
	}
	return v, nil
}

// sif weighs a word of frequency rank r by a/(a+p), p its probability by
// Zipf's law over GloVe's 400,000 words: "the" weighs almost nothing, a
// word of rank 10,000 nearly 1 (smooth inverse frequency).
func sif(r uint64) float32 {
	const a = 1e-4
	p := 1 / (float64(r+1) * (math.Log(400_000) + 0.5772))
	return float32(a / (a + p))
}

// Dim answers the vectors' dimensions.
func (v *Vectors) Dim() int { return v.dim }

// Add adds word's vector, times w and the word's own weight, to dst (of
// Dim elements); false when the word is not in the table.
func (v *Vectors) Add(dst []float32, word string, w float32) bool {
	i, ok := v.index[word]
	if !ok {
		return false
	}
	w *= v.weight[i] / 200
	for d, x := range v.vec[int(i)*v.dim : int(i+1)*v.dim] {
		dst[d] += w * float32(x)
	}
	return true
}

// Len answers how many words the table holds.
func (v *Vectors) Len() int { return len(v.weight) }
