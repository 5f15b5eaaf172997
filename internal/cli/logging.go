package cli

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logLevels are the levels --log-level accepts.
var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// newLogger answers the server's logger writing to w at level (debug, info,
// warn or error) in format (json, one object a line for a log shipper, or
// text, key=value for a terminal).
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	l, ok := logLevels[strings.ToLower(level)]
	if !ok {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want json or text", format)
	}
}
