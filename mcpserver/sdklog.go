package mcpserver

import (
	"context"
	"log/slog"
)

// sdkLogger answers the logger handed to the MCP SDK: log, with the SDK's
// INFO records (a session connected, initialized, ended, a client's log
// level set: a few lines for every session, routine on a busy server)
// written at DEBUG. Its warnings and errors keep their level.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(routineHandler{log.Handler()})
}

// routineHandler writes INFO records at DEBUG.
type routineHandler struct{ next slog.Handler }

func routine(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h routineHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, routine(l))
}

func (h routineHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = routine(r.Level)
	return h.next.Handle(ctx, r)
}

func (h routineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return routineHandler{h.next.WithAttrs(attrs)}
}

func (h routineHandler) WithGroup(name string) slog.Handler {
	return routineHandler{h.next.WithGroup(name)}
}
