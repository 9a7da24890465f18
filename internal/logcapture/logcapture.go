// Package logcapture is a slog destination that tests read while servers
// write to it from their own goroutines.
package logcapture

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Buffer collects log lines; safe for concurrent writes and reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// New returns a buffer and a text logger at level that writes to it.
func New(level slog.Level) (*Buffer, *slog.Logger) {
	b := &Buffer{}
	return b, slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: level}))
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything logged so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Count is how many times sub was logged.
func (b *Buffer) Count(sub string) int { return strings.Count(b.String(), sub) }

// Lines are the logged lines that hold every one of subs.
func (b *Buffer) Lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		all := l != ""
		for _, s := range subs {
			all = all && strings.Contains(l, s)
		}
		if all {
			out = append(out, l)
		}
	}
	return out
}
