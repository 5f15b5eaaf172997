package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"unicode"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// output is a command's -o flag and the columns its table shows.
type output struct {
	format string
	// field is the dotted path -o field=PATH prints, for scripts.
	field string
	// columns are the fields a table shows, in order; a list answer's
	// items are rows, any other object is one field per line.
	columns []string
	// list is the field of the answer holding its rows ("items").
	list string
}

// addOutput gives cmd -o/--output, table by default.
func addOutput(cmd *cobra.Command, columns ...string) *output {
	o := &output{columns: columns, list: "items"}
	if len(columns) > 0 && strings.HasPrefix(columns[0], "@") {
		o.list, o.columns = columns[0][1:], columns[1:]
	}
	cmd.Flags().StringVarP(&o.format, "output", "o", "table", "how to print the answer: table, json (the API's answer as it came), yaml, or field=PATH (one field, e.g. id or credential.id: a list's items one a line)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json", "yaml", "field="}, cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	return o
}

// check refuses an unknown format before anything is sent.
func (o *output) check() error {
	switch o.format {
	case "table", "json", "yaml":
		return nil
	}
	// field=PATH lets a shell capture an id or a key without a JSON tool.
	if path, ok := strings.CutPrefix(o.format, "field="); ok && path != "" {
		o.field = path
		return nil
	}
	return usageErr("-o %q: want table, json, yaml or field=PATH", o.format)
}

// print writes the API's answer data in the chosen format.
func (o *output) print(w io.Writer, data []byte) error {
	switch o.format {
	case "json":
		// The API's answer as it came, indented for reading.
		var out bytes.Buffer
		if json.Indent(&out, data, "", "  ") != nil {
			_, err := w.Write(data)
			return err
		}
		out.WriteByte('\n')
		_, err := w.Write(out.Bytes())
		return err
	case "yaml":
		var n yaml.Node
		if err := yaml.Unmarshal(data, &n); err != nil {
			return fmt.Errorf("the answer is not JSON: %w", err)
		}
		block(&n)
		enc := yaml.NewEncoder(w)
		enc.SetIndent(2)
		if err := enc.Encode(&n); err != nil {
			return err
		}
		return enc.Close()
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("the answer is not JSON: %w", err)
	}
	if o.field != "" {
		return o.fields(w, v)
	}
	return o.table(w, v)
}

// fields prints the value at o.field: of each item, one a line, for a list
// answer; of the answer itself otherwise. A field the answer lacks is an
// error, so a script capturing it never goes on with an empty value: for a
// list, a field no item has (an empty list prints nothing and is no
// error, since there is nothing to ask about; an item without an optional
// field the others have is skipped).
func (o *output) fields(w io.Writer, v any) error {
	obj, _ := v.(map[string]any)
	if items, ok := obj[o.list].([]any); ok {
		found := false
		have := map[string]bool{}
		for _, it := range items {
			row, _ := it.(map[string]any)
			for k := range row {
				have[k] = true
			}
			if x := lookup(row, o.field); x != nil {
				found = true
				fmt.Fprintln(w, cell(x))
			}
		}
		if !found && len(items) > 0 {
			return fmt.Errorf("no item of the answer has a field %q; the items have %s", o.field, strings.Join(keysOf(toAny(have)), ", "))
		}
		return nil
	}
	x := lookup(obj, o.field)
	if x == nil {
		return fmt.Errorf("the answer has no field %q", o.field)
	}
	_, err := fmt.Fprintln(w, cell(x))
	return err
}

// block turns JSON's flow style into YAML's block style, keeping the key
// order the API answered.
func block(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		block(c)
	}
}

// table prints v for people: the items of a list as rows under the
// columns, anything else as a field per line.
func (o *output) table(w io.Writer, v any) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	obj, _ := v.(map[string]any)
	if items, ok := obj[o.list].([]any); ok && len(o.columns) > 0 {
		fmt.Fprintln(tw, strings.ToUpper(strings.Join(o.columns, "\t")))
		for _, it := range items {
			row, _ := it.(map[string]any)
			cells := make([]string, len(o.columns))
			for i, c := range o.columns {
				cells[i] = cell(lookup(row, c))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if next, _ := obj["next_cursor"].(string); next != "" {
			fmt.Fprintf(w, "(more: --cursor %s)\n", next)
		}
		return nil
	}
	if obj == nil {
		fmt.Fprintln(tw, cell(v))
		return tw.Flush()
	}
	for _, k := range keysOf(obj) {
		fmt.Fprintf(tw, "%s:\t%s\n", k, cell(obj[k]))
	}
	return tw.Flush()
}

// lookup reads a dotted path (credential.id) in row.
func lookup(row map[string]any, path string) any {
	var v any = row
	for _, p := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// cell renders one value on one line.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return "-"
		}
		// A control character (an escape sequence in a tool's
		// description, a record's field) is shown as a space, never
		// written to the terminal.
		return strings.Map(func(r rune) rune {
			if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
				return ' '
			}
			return r
		}, x)
	case json.Number:
		return x.String()
	case bool:
		return fmt.Sprint(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = cell(e)
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, ",")
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// keysOf answers an object's keys, sorted so a table is stable.
func keysOf(m map[string]any) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// printValue prints a value the command line made itself (not an API
// answer) in the chosen format.
func printValue(a *app, o *output, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return o.print(a.stdout, b)
}

// toAny answers a set as the map keysOf reads.
func toAny(set map[string]bool) map[string]any {
	m := make(map[string]any, len(set))
	for k := range set {
		m[k] = true
	}
	return m
}
