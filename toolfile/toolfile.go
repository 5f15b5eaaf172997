// Package toolfile reads tool definitions from their file forms. A file holds
// one definition, in YAML or JSON, in one of two shapes:
//
//   - toolplane's own form: the fields of toolplane.Definition, flat;
//   - the "toolplatform/v1" form (apiVersion, kind: Tool, metadata, spec,
//     version), mapped onto the same fields as docs/tool-definition.md
//     describes.
//
// Decoding is strict: an unknown field is an error naming the field, because
// a misspelled safety annotation that is silently ignored is worse than a
// refused file. Reading a file checks its shape only; whether the definition
// is acceptable is the registry's decision.
package toolfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane"
)

// MaxFileBytes bounds a definition file. Schemas have their own, lower cap;
// this one keeps a stray multi-megabyte file from being read whole.
const MaxFileBytes = 1 << 20

// ErrFormat marks a file that is not a readable definition.
var ErrFormat = errors.New("not a tool definition")

// SeedAPIVersion is the apiVersion of the toolplatform/v1 form.
const SeedAPIVersion = "toolplatform/v1"

// Note is something a reader should know about a file that still loaded:
// a field of the toolplatform/v1 form that has no toolplane equivalent.
type Note struct {
	Field   string
	Message string
}

// ReadFile reads the definition in path.
func ReadFile(path string) (toolplane.Definition, []Note, error) {
	f, err := os.Open(path)
	if err != nil {
		return toolplane.Definition{}, nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return toolplane.Definition{}, nil, fmt.Errorf("read %s: %w", path, err)
	}
	d, notes, err := Parse(data, filepath.Ext(path))
	if err != nil {
		return d, notes, fmt.Errorf("%s: %w", path, err)
	}
	return d, notes, nil
}

// Parse reads one definition from data. ext (".yaml", ".yml", ".json" or
// "") picks the syntax; with "" a document starting with '{' is JSON.
func Parse(data []byte, ext string) (toolplane.Definition, []Note, error) {
	if len(data) > MaxFileBytes {
		return toolplane.Definition{}, nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFormat, len(data), MaxFileBytes)
	}
	js, err := toJSON(data, ext)
	if err != nil {
		return toolplane.Definition{}, nil, err
	}
	var probe struct {
		APIVersion *string `json:"apiVersion"`
	}
	if err := json.Unmarshal(js, &probe); err != nil {
		return toolplane.Definition{}, nil, fmt.Errorf("%w: the document must be an object: %v", ErrFormat, err)
	}
	switch {
	case probe.APIVersion == nil:
		var d toolplane.Definition
		if err := strict(js, &d); err != nil {
			return d, nil, err
		}
		return d, nil, nil
	case *probe.APIVersion == SeedAPIVersion:
		return fromSeed(js)
	default:
		return toolplane.Definition{}, nil, fmt.Errorf("%w: apiVersion %q is not read; use %q or toolplane's flat form (no apiVersion)", ErrFormat, *probe.APIVersion, SeedAPIVersion)
	}
}

func toJSON(data []byte, ext string) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	isJSON := strings.EqualFold(ext, ".json") || ext == "" && len(trimmed) > 0 && trimmed[0] == '{'
	if isJSON {
		if !json.Valid(trimmed) {
			var v any
			err := json.Unmarshal(trimmed, &v)
			return nil, fmt.Errorf("%w: invalid JSON: %v", ErrFormat, err)
		}
		return trimmed, nil
	}
	// YAML 1.2 semantics (go.yaml.in/yaml/v3): "yes", "no", "on" stay
	// strings, so an enum of them is not silently turned into booleans.
	var v any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: the file is empty", ErrFormat)
		}
		return nil, fmt.Errorf("%w: invalid YAML: %v", ErrFormat, err)
	}
	var extra any
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: a file holds one definition; split the documents into separate files", ErrFormat)
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v (mapping keys must be strings)", ErrFormat, err)
	}
	return js, nil
}

// strict decodes js into v, refusing unknown fields and trailing data.
func strict(js []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrFormat, fieldError(err))
	}
	if dec.More() {
		return fmt.Errorf("%w: data after the definition", ErrFormat)
	}
	return nil
}

// fieldError rewords decoding errors so they name the field.
func fieldError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("field %s: got %s, want %s", te.Field, te.Value, te.Type)
	}
	return err
}
