package cluster

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// slogWriter turns the line-oriented output of raft's hclog and memberlist's
// log.Logger into slog records, keeping the level they printed.
type slogWriter struct {
	log *slog.Logger
}

func (w *slogWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		lvl := slog.LevelInfo
		switch {
		case strings.HasPrefix(s, "[TRACE]"), strings.HasPrefix(s, "[DEBUG]"):
			lvl = slog.LevelDebug
		case strings.HasPrefix(s, "[WARN]"):
			lvl = slog.LevelWarn
		case strings.HasPrefix(s, "[ERROR]"), strings.HasPrefix(s, "[ERR]"):
			lvl = slog.LevelError
		}
		if i := strings.Index(s, "]"); i >= 0 && strings.HasPrefix(s, "[") {
			s = strings.TrimSpace(s[i+1:])
		}
		if lvl > slog.LevelDebug && ownClose(s) {
			// This node closed the connection itself (a group closing, the
			// node stopping): nothing an operator need look at.
			lvl = slog.LevelDebug
		}
		w.log.Log(context.Background(), lvl, s)
	}
	return len(p), nil
}

var _ io.Writer = (*slogWriter)(nil)

// ownClose reports whether a library's log line is about a connection or
// transport this node closed itself.
func ownClose(s string) bool {
	return strings.Contains(s, "use of closed network connection") || strings.Contains(s, "transport shutdown")
}

// newHCLogger adapts hashicorp's logger onto slog with a component attribute.
func newHCLogger(component string, l *slog.Logger) hclog.Logger {
	lvl := hclog.Info
	if l.Enabled(context.Background(), slog.LevelDebug) {
		lvl = hclog.Debug
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        component,
		Level:       lvl,
		Output:      &slogWriter{log: l.With("component", component)},
		DisableTime: true,
	})
}
