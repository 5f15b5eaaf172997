package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Hash returns the SHA-256 of the canonical form of v as 64 lowercase hex
// digits. Values that differ only in what the canonical form erases (member
// order, number spelling) hash alike; any other difference changes the hash.
func Hash(v any) (string, error) {
	e := getEncoder()
	defer putEncoder(e)
	buf, err := e.appendValue(e.buf[:0], v, 0)
	e.buf = buf
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf)
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], sum[:])
	return string(out[:]), nil
}

// HashJSON decodes raw as exactly one JSON value, numbers kept as written
// (json.Number), and returns its Hash. Two texts that differ only in member
// order, whitespace, string escapes or number spelling hash alike.
//
// Text after the value is refused rather than ignored, so that no two
// different requests reduce to the same hash by truncation. An object with
// two members of the same name is refused with ErrDuplicateKey: encoding/json
// would keep the last one, but a tool's own parser may keep the first, so the
// hash could stand for an argument the tool never saw.
func HashJSON(raw []byte) (string, error) {
	v, err := decode(raw)
	if err != nil {
		return "", err
	}
	return Hash(v)
}

// decode reads raw as one JSON value of the types Append accepts.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: data after the top-level value", ErrInvalidJSON)
	}
	return v, nil
}

// decodeValue reads the next value, which is nested inside depth arrays and
// objects. It walks tokens rather than calling Decode so that it can see
// duplicate member names and stop at MaxDepth before building anything
// deeper.
func decodeValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := nextToken(dec)
	if err != nil {
		return nil, err
	}
	delim, ok := tok.(json.Delim)
	if !ok {
		// string, json.Number, bool or nil.
		return tok, nil
	}
	if depth >= MaxDepth {
		return nil, fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
	}
	switch delim {
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := nextToken(dec); err != nil {
			return nil, err
		}
		return arr, nil
	case '{':
		obj := map[string]any{}
		for dec.More() {
			tok, err := nextToken(dec)
			if err != nil {
				return nil, err
			}
			name, ok := tok.(string)
			if !ok {
				// The decoder yields only strings in key position.
				return nil, fmt.Errorf("%w: object key %v is not a string", ErrInvalidJSON, tok)
			}
			if _, dup := obj[name]; dup {
				return nil, fmt.Errorf("%w: %q", ErrDuplicateKey, name)
			}
			v, err := decodeValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			obj[name] = v
		}
		if _, err := nextToken(dec); err != nil {
			return nil, err
		}
		return obj, nil
	default:
		// A closing delimiter where a value belongs; the decoder refuses
		// these itself, so this is only a guard.
		return nil, fmt.Errorf("%w: unexpected %v", ErrInvalidJSON, delim)
	}
}

// nextToken reads a token, treating the end of input as an error: every
// caller is still inside a value.
func nextToken(dec *json.Decoder) (json.Token, error) {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidJSON, err)
	}
	return tok, nil
}
