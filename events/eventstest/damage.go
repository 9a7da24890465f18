package eventstest

import (
	"bytes"
	"os"
	"path/filepath"
)

// BlockFile is the path of the first block file of stream's messages on a
// stopped server (the file a small test log lives in).
func (s *Server) BlockFile(stream string) string {
	return filepath.Join(s.Dir, "jetstream", "$G", "streams", stream, "msgs", "1.blk")
}

// TruncateBlock cuts the last n bytes off the stream's first block file, as
// a crash in the middle of a write or a full disk leaves it. The server
// must be stopped.
func (s *Server) TruncateBlock(stream string, n int) {
	s.t.Helper()
	path := s.BlockFile(stream)
	fi, err := os.Stat(path)
	if err != nil {
		s.t.Fatalf("truncate block: %v", err)
	}
	if err := os.Truncate(path, fi.Size()-int64(n)); err != nil {
		s.t.Fatalf("truncate block: %v", err)
	}
}

// FlipBlockBytes inverts n bytes of the stream's first block file, starting
// at the first occurrence of marker (a subject, say): bit rot inside one
// record. The server must be stopped.
func (s *Server) FlipBlockBytes(stream string, marker []byte, n int) {
	s.t.Helper()
	path := s.BlockFile(stream)
	b, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatalf("flip block bytes: %v", err)
	}
	at := bytes.Index(b, marker)
	if at < 0 || at+n > len(b) {
		s.t.Fatalf("flip block bytes: %q not found with %d bytes after it in %s", marker, n, path)
	}
	for i := at; i < at+n; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		s.t.Fatalf("flip block bytes: %v", err)
	}
}
