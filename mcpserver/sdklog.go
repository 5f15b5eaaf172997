package mcpserver

import (
	"context"
	"log/slog"
	"strings"
)

// sdkLogger answers the logger handed to the MCP SDK: log, with the SDK's
// INFO records (a session connected, initialized, ended, a client's log
// level set: a few lines for every session, routine on a busy server)
// written at DEBUG, and so its warning that a notification could not be
// delivered to a session without an open stream (see undelivered). Its
// other warnings and errors keep their level.
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

// undelivered reports whether r is the SDK's warning that a notification
// to a session was refused by its transport: the session holds no stream
// open (a client between requests, which most are), so a tools/list_changed
// after every publish would warn once per idle session. Nothing is lost:
// the client reads the changed list at its next tools/list, and a call
// shaped for the old one is answered tool_changed. The SDK hands over only
// this formatted message (its error is not in the record), so its text is
// what can be matched: a notification ("calling notifications/…") and the
// transport's own refusal (jsonrpc2.ErrRejected's message).
func undelivered(r slog.Record) bool {
	return r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, "calling notifications/") && strings.Contains(r.Message, "rejected by transport")
}

func (h routineHandler) Enabled(ctx context.Context, l slog.Level) bool {
	// A warning may be one written at DEBUG (undelivered), so it is let
	// through when DEBUG is on.
	return h.next.Enabled(ctx, routine(l)) || (l == slog.LevelWarn && h.next.Enabled(ctx, slog.LevelDebug))
}

func (h routineHandler) Handle(ctx context.Context, r slog.Record) error {
	if undelivered(r) {
		r.Level = slog.LevelDebug
		if !h.next.Enabled(ctx, r.Level) {
			return nil
		}
		return h.next.Handle(ctx, r)
	}
	r.Level = routine(r.Level)
	return h.next.Handle(ctx, r)
}

func (h routineHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return routineHandler{h.next.WithAttrs(attrs)}
}

func (h routineHandler) WithGroup(name string) slog.Handler {
	return routineHandler{h.next.WithGroup(name)}
}
