package toolplane

import (
	"context"
	"time"
)

// UpstreamToolSetting is an operator's runtime statement about one tool of
// an upstream MCP server: the fields of the upstreams file's relaxation
// (effect, destructive, requires_approval, ...) for that tool, which
// override the file's for the whole deployment until reset.
type UpstreamToolSetting struct {
	// Upstream is the connection's slug, Tool the server's own tool name.
	Upstream string
	Tool     string
	// Settings is the relaxation, JSON; the upstream package reads and
	// checks it, the store keeps it as given.
	Settings  []byte
	UpdatedBy string
	UpdatedAt time.Time
}

// UpstreamSettingStore is the storage of runtime upstream tool settings.
// They are the deployment's, not an organization's: every node serves the
// same platform tools.
type UpstreamSettingStore interface {
	// PutUpstreamToolSetting creates or replaces the setting of one tool.
	PutUpstreamToolSetting(ctx context.Context, s *UpstreamToolSetting) error
	// DeleteUpstreamToolSetting removes it; ErrNotFound when there is none.
	DeleteUpstreamToolSetting(ctx context.Context, upstream, tool string) error
	// ListUpstreamToolSettings answers every setting, by upstream then tool.
	ListUpstreamToolSettings(ctx context.Context) ([]UpstreamToolSetting, error)
}
