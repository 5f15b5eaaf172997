package discoveryeval

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/toolplane/toolplane/discovery"
	"github.com/toolplane/toolplane/projection"
	"github.com/toolplane/toolplane/registry"
)

// Encodings are the BPE encodings tokens are counted in: GPT-4's and
// GPT-4o's, both shipped inside the loader module, so counting needs no
// network.
var Encodings = []string{"cl100k_base", "o200k_base"}

var loadOnce sync.Once

// encoding answers the named encoding, read from the offline loader.
func encoding(name string) (*tiktoken.Tiktoken, error) {
	loadOnce.Do(func() { tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader()) })
	enc, err := tiktoken.GetEncoding(name)
	if err != nil {
		return nil, fmt.Errorf("discoveryeval: encoding %s: %w", name, err)
	}
	return enc, nil
}

// CountTokens answers how many tokens text is in the named encoding.
func CountTokens(encodingName, text string) (int, error) {
	enc, err := encoding(encodingName)
	if err != nil {
		return 0, err
	}
	return len(enc.Encode(text, nil, nil)), nil
}

// Listing is what tools/list answers up front for one grant, in the two
// modes a session may be in.
type Listing struct {
	Tools int `json:"tools"`
	// FullBytes and MetaBytes are the JSON sizes of the ListToolsResult
	// in full mode (every tool, as projection.Shown shows it) and in
	// meta-tool mode (find_tools, describe_tool, call_tool).
	FullBytes int `json:"full_bytes"`
	MetaBytes int `json:"meta_bytes"`
	// Full and Meta are their tokens, by encoding.
	Full map[string]int `json:"full_tokens"`
	Meta map[string]int `json:"meta_tokens"`
}

// FullListing answers the JSON of the ListToolsResult showing every tool.
func FullListing(ts []*registry.Tool) ([]byte, error) {
	res := mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(ts))}
	for _, t := range ts {
		res.Tools = append(res.Tools, projection.Shown(t))
	}
	return json.Marshal(res)
}

// MetaListing answers the JSON of the ListToolsResult of meta-tool mode.
func MetaListing() ([]byte, error) {
	var res mcp.ListToolsResult
	for _, m := range discovery.MetaTools() {
		res.Tools = append(res.Tools, &mcp.Tool{Name: m.Name, Title: m.Title, Description: m.Description, InputSchema: m.InputSchema,
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: m.ReadOnly}})
	}
	return json.Marshal(res)
}

// Tokens measures the up-front listing of a grant of n tools (the
// catalogue grown to n by Grow), in both modes.
func Tokens(n int) (Listing, error) {
	reg, err := Registry(Grow(n))
	if err != nil {
		return Listing{}, err
	}
	ts := reg.Tools("")
	full, err := FullListing(ts)
	if err != nil {
		return Listing{}, fmt.Errorf("discoveryeval: full listing: %w", err)
	}
	meta, err := MetaListing()
	if err != nil {
		return Listing{}, fmt.Errorf("discoveryeval: meta listing: %w", err)
	}
	l := Listing{Tools: len(ts), FullBytes: len(full), MetaBytes: len(meta), Full: map[string]int{}, Meta: map[string]int{}}
	for _, e := range Encodings {
		if l.Full[e], err = CountTokens(e, string(full)); err != nil {
			return Listing{}, err
		}
		if l.Meta[e], err = CountTokens(e, string(meta)); err != nil {
			return Listing{}, err
		}
	}
	return l, nil
}
