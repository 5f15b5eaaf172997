package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// refEvents is the event-stream reading events.next implements, written
// the plain way: the whole stream in hand, split into lines.
func refEvents(in []byte) [][]byte {
	var out [][]byte
	var data []byte
	lines, message := 0, true
	for rest := in; len(rest) > 0; {
		var line []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = bytes.TrimSuffix(rest[:i], []byte("\r")), rest[i+1:]
			if len(line) == 0 {
				if len(data) > 0 && message {
					out = append(out, data)
				}
				data, lines, message = nil, 0, true
				continue
			}
		} else {
			line, rest = rest, nil // the last line, which no newline ends
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if lines > 0 {
				data = append(data, '\n')
			}
			lines++
			data = append(data, value...)
		case "event":
			message = len(value) == 0 || string(value) == "message"
		}
	}
	if len(data) > 0 && message {
		out = append(out, data)
	}
	return out
}

// FuzzEvents reads arbitrary streams through a reader far smaller than the
// pooled one, so lines longer than its buffer are the common case, and
// wants exactly the events the plain reading finds.
func FuzzEvents(f *testing.F) {
	for _, seed := range []string{
		"data: {\"id\":1}\n\n",
		"event: ping\ndata: x\n\ndata: a\ndata: b\r\n\r\n",
		": comment\nid: 7\nretry: 10\n\ndata:\ndata:\n\n",
		"data: a very long line that is longer than sixteen bytes\n\n",
		"data: no blank line at the end",
		"event:message\ndata: y\n\nevent: other\ndata: z\n\n",
		"data\n\n\n\ndata: \r",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		e := &events{r: bufio.NewReaderSize(bytes.NewReader(in), 16)}
		var got [][]byte
		for range len(in) + 1 {
			data, err := e.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("next: %v", err)
			}
			got = append(got, bytes.Clone(data))
		}
		want := refEvents(in)
		if len(got) != len(want) {
			t.Fatalf("%q: %d events %q, want %d %q", in, len(got), got, len(want), want)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%q: event %d is %q, want %q", in, i, got[i], want[i])
			}
		}
	})
}
