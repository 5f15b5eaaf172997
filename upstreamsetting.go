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
	// PutUpstreamToolSettingRecorded creates or replaces the setting of
	// one tool and appends c, its record in the change log, in one
	// transaction: a setting every node applies is never stored without
	// its record. A change that cannot be stored (ErrExists for a
	// duplicate ID) stores neither.
	PutUpstreamToolSettingRecorded(ctx context.Context, s *UpstreamToolSetting, c *Change) error
	// DeleteUpstreamToolSettingRecorded removes it and appends c in one
	// transaction; ErrNotFound, and nothing recorded, when there is none.
	DeleteUpstreamToolSettingRecorded(ctx context.Context, upstream, tool string, c *Change) error
	// ListUpstreamToolSettings answers every setting, by upstream then tool.
	ListUpstreamToolSettings(ctx context.Context) ([]UpstreamToolSetting, error)
}
