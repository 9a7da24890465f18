package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/projections"
)

// BackupContentType is the media type of GET /api/v1/backup.
const BackupContentType = "application/vnd.claimstream.backup"

// backup streams a backup file of the log (eventlog.WriteBackup): only the
// process's own connection may take a JetStream snapshot, so an online
// backup goes through here. Once bytes have gone out a failure cannot turn
// into an error status: the connection is cut, and the file, missing its
// trailer, is refused by restore.
func (s *server) backup(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// A backup is as long as the log: exempt from the write timeout.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	out := &lazyBackupWriter{w: w}
	m, err := eventlog.WriteBackup(r.Context(), s.store.JetStream().Conn(), s.store.Stream(), out, s.viewsDigestAt, nil)
	if s.opts.OnBackup != nil {
		s.opts.OnBackup(s.now(), m.SnapshotSize, err)
	}
	if err != nil {
		s.log.Error("backup failed", "stream", s.store.Stream(), "bytes", m.SnapshotSize, "err", err)
		if !out.started {
			writeError(w, http.StatusServiceUnavailable, "Unavailable", err.Error())
			return
		}
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup sent", "stream", m.Stream, "firstSeq", m.FirstSeq, "lastSeq", m.LastSeq,
		"events", m.Msgs, "bytes", m.SnapshotSize, "viewsDigest", m.ViewsDigest, "took", time.Since(start).Round(time.Millisecond))
}

// viewsDigestAt folds the log up to seq: the live views may already be
// past the snapshot's end.
func (s *server) viewsDigestAt(ctx context.Context, seq uint64) (string, error) {
	st := projections.NewState()
	if seq > 0 {
		var err error
		if st, err = projections.Rebuild(ctx, s.store, seq); err != nil {
			return "", err
		}
	}
	return projections.ViewsDigest(st)
}

// lazyBackupWriter sends the 200 and its headers with the first bytes, so
// a failure before them is still an error answer.
type lazyBackupWriter struct {
	w       http.ResponseWriter
	started bool
}

func (l *lazyBackupWriter) Write(b []byte) (int, error) {
	if !l.started {
		l.started = true
		l.w.Header().Set("Content-Type", BackupContentType)
		l.w.Header().Set("Content-Disposition", `attachment; filename="claimstream.backup"`)
		l.w.WriteHeader(http.StatusOK)
	}
	return l.w.Write(b)
}

// Backup writes a backup file of the log to w (GET /api/v1/backup). The
// caller verifies it (eventlog.VerifyBackup) before keeping it.
func (c *Client) Backup(ctx context.Context, w io.Writer) (int64, error) {
	resp, err := c.Do(ctx, http.MethodGet, "/api/v1/backup", nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("backup: the transfer broke after %d bytes: %w", n, err)
	}
	return n, nil
}
