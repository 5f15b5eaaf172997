package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// TestDecodeEventsInOrder: an export decoded on every core answers its
// events in the order of its lines, across batches and empty lines, and
// the error of its first bad line, as decoding line after line would.
func TestDecodeEventsInOrder(t *testing.T) {
	t.Parallel()
	const n = 3*batchLines + 17
	var lines []string
	var want []toolplane.AuditEvent
	for i := range n {
		e := toolplane.AuditEvent{ID: fmt.Sprintf("aud_%d", i), OrganizationID: "org-" + fmt.Sprint(i%3), Seq: int64(i + 1),
			Reason: "<&>", CreatedAt: time.Unix(1_780_000_000, int64(i)*1000).UTC()}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back toolplane.AuditEvent
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		want = append(want, back)
		lines = append(lines, string(b))
		if i%100 == 0 {
			lines = append(lines, "")
		}
	}
	dir := t.TempDir()
	write := func(name string, lines []string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	lines[5] += "\r" // a line ending "\r\n" reads as without the "\r"
	got, err := decodeEvents(write("good.jsonl", lines))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %d events, not the %d of the file in its order", len(got), len(want))
	}

	bad := append([]string(nil), lines...)
	bad[1200-1] = `{"seq":"x"}`
	bad[1500-1] = `{`
	bad[n] = `not json`
	file := write("bad.jsonl", bad)
	_, err = decodeEvents(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+" line 1200: ") {
		t.Fatalf("decode a file bad at 1200, 1500 and %d = %v", n+1, err)
	}
}
