package eventlog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A backup file is
//
//	"CLAIMSTREAM-BACKUP\n"
//	the stream's JetStream snapshot, as the server streamed it
//	the manifest (JSON)
//	trailer: manifest length (uint64, big endian), SHA-256 of the
//	manifest, "CSBKEND1"
//
// The manifest comes last because the views' digest at the snapshot's last
// sequence is known only once the snapshot has been read; a file cut short
// loses its trailer and is refused whole.
const (
	backupMagic    = "CLAIMSTREAM-BACKUP\n"
	backupEndMagic = "CSBKEND1"
	backupTrailer  = 8 + sha256.Size + len(backupEndMagic)
	// BackupVersion is the version of the file layout and manifest.
	BackupVersion = 1
	// maxManifest bounds the manifest a reader accepts (a damaged length
	// must not allocate gigabytes).
	maxManifest   = 1 << 20
	backupChunk   = 128 << 10
	backupAckWait = 30 * time.Second
)

// BackupManifest describes what a backup file holds.
type BackupManifest struct {
	Version int       `json:"version"`
	Stream  string    `json:"stream"`
	Created time.Time `json:"created"`
	// FirstSeq, LastSeq and Msgs are the stream's at the snapshot: the
	// snapshot holds exactly the events up to LastSeq, whatever was
	// appended while it ran.
	FirstSeq uint64 `json:"firstSeq"`
	LastSeq  uint64 `json:"lastSeq"`
	Msgs     uint64 `json:"messages"`
	// SnapshotSize and SnapshotSHA256 cover the snapshot section.
	SnapshotSize   int64  `json:"snapshotSize"`
	SnapshotSHA256 string `json:"snapshotSha256"`
	// ViewsDigest is projections.ViewsDigest of the views folded up to
	// LastSeq.
	ViewsDigest string `json:"viewsDigest"`
	// Config and State are the stream's configuration and state as the
	// server gave them; restore hands them back to it.
	Config json.RawMessage `json:"config"`
	State  json.RawMessage `json:"state"`
}

// WithReplicas returns m set to restore its stream with n replicas: a
// single server's backup is placed on a cluster's replicas by the restore
// itself, rather than restored on one and raised after.
func (m BackupManifest) WithReplicas(n int) (BackupManifest, error) {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(m.Config, &cfg); err != nil {
		return m, badBackup("the stream configuration: %v", err)
	}
	cfg["num_replicas"] = json.RawMessage(strconv.Itoa(n))
	b, err := json.Marshal(cfg)
	if err != nil {
		return m, fmt.Errorf("backup of %s: set %d replicas: %w", m.Stream, n, err)
	}
	m.Config = b
	return m, nil
}

// ErrBadBackup is matched (errors.Is) by every refusal of a damaged or
// foreign backup file.
var ErrBadBackup = errors.New("not a whole claimstream backup")

func badBackup(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadBackup, fmt.Sprintf(format, args...))
}

// Validate reports the first field of m that cannot describe a backup.
func (m BackupManifest) Validate() error {
	switch {
	case m.Version != BackupVersion:
		return badBackup("manifest version %d, this build reads %d", m.Version, BackupVersion)
	case !ValidToken(m.Stream):
		return badBackup("stream name %q is not one subject token", m.Stream)
	case (m.FirstSeq == 0 && m.LastSeq != 0) || m.LastSeq+1 < m.FirstSeq:
		return badBackup("sequences %d..%d are not a range", m.FirstSeq, m.LastSeq)
	case m.Msgs > seqSpan(m.FirstSeq, m.LastSeq):
		return badBackup("%d messages do not fit in sequences %d..%d", m.Msgs, m.FirstSeq, m.LastSeq)
	case m.SnapshotSize <= 0:
		return badBackup("snapshot size %d", m.SnapshotSize)
	case !isHexSHA256(m.SnapshotSHA256):
		return badBackup("snapshot checksum %q is not a SHA-256", m.SnapshotSHA256)
	case !isHexSHA256(m.ViewsDigest):
		return badBackup("views digest %q is not a SHA-256", m.ViewsDigest)
	}
	var cfg struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(m.Config, &cfg); err != nil || cfg.Name != m.Stream {
		return badBackup("the stream configuration does not name stream %s", m.Stream)
	}
	var st streamState
	if err := json.Unmarshal(m.State, &st); err != nil || st.FirstSeq != m.FirstSeq || st.LastSeq != m.LastSeq || st.Msgs != m.Msgs {
		return badBackup("the stream state does not match sequences %d..%d, %d messages", m.FirstSeq, m.LastSeq, m.Msgs)
	}
	return nil
}

// seqSpan is how many sequences first..last holds (an empty stream has
// first 0, or first one past last).
func seqSpan(first, last uint64) uint64 {
	if first == 0 || last < first {
		return 0
	}
	return last - first + 1
}

func isHexSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size && hex.EncodeToString(b) == s
}

// streamState is the part of the server's stream state a backup checks.
type streamState struct {
	Msgs     uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// apiError is the error of a JetStream API answer.
type apiError struct {
	Error *jetstream.APIError `json:"error"`
}

func (a apiError) err(what string) error {
	if a.Error == nil {
		return nil
	}
	return &refusal{what: what, api: a.Error}
}

// refusal is a JetStream API answer's error, named by what was asked. It
// unwraps to the server's *jetstream.APIError, and its code tells the
// refusals a restore may meet apart (errors.Is with the ErrRestore
// sentinels).
type refusal struct {
	what string
	api  *jetstream.APIError
}

func (r *refusal) Error() string {
	return fmt.Sprintf("%s: %s (code %d)", r.what, r.api.Description, r.api.ErrorCode)
}

func (r *refusal) Unwrap() error { return r.api }

func (r *refusal) Is(target error) bool {
	switch target {
	case ErrRestoreRaced:
		return r.api.ErrorCode == codeStreamNameExist || r.api.ErrorCode == codeStreamNameExistRestore
	case ErrRestoreStalled:
		// Every failed restore shares 10062; only its description says
		// that the chunks stopped coming.
		return r.api.ErrorCode == codeRestoreFailed && strings.Contains(r.api.Description, "is stalled")
	case ErrRestoreNoPeers:
		return r.api.ErrorCode == codeClusterNoPeers
	}
	return false
}

// JetStream's error codes (nats-server's server/errors.json) a restore
// tells apart.
const (
	codeClusterNoPeers         = 10005 // JSClusterNoPeersErrF: "no suitable peers for placement"
	codeClusterNotAvail        = 10008 // JSClusterNotAvailErr: a meta leader change
	codeStreamNameExist        = 10058 // JSStreamNameExistErr
	codeRestoreFailed          = 10062 // JSStreamRestoreErrF: "restore failed: ..."
	codeStreamNameExistRestore = 10130 // JSStreamNameExistRestoreFailedErr
)

var (
	// ErrRestoreRaced is a restore refused because the stream exists:
	// another replica's restore (or a create) won the race.
	ErrRestoreRaced = errors.New("the stream exists")
	// ErrRestoreStalled is a restore the server dropped because it
	// received no chunk of it for five seconds. The server drops it before
	// it creates the stream, so nothing is left behind and the restore may
	// be asked again.
	ErrRestoreStalled = errors.New("the restore stalled")
	// ErrRestoreNoPeers is a restore refused because the cluster knows no
	// peer to place the stream on yet: nothing was created.
	ErrRestoreNoPeers = errors.New("no peer to place the stream on")
)

// DigestAt returns the views' digest folded up to seq.
type DigestAt func(ctx context.Context, seq uint64) (string, error)

// WriteBackup writes a backup of stream to w through JetStream's stream
// snapshot API (the stream's consumers included): consistent while appends
// go on, it holds the log up to the last sequence at its start. nc must be
// the process's own connection (only it administers JetStream). progress,
// when set, is told the snapshot bytes written so far.
func WriteBackup(ctx context.Context, nc *nats.Conn, stream string, w io.Writer, digestAt DigestAt, progress func(int64)) (BackupManifest, error) {
	m := BackupManifest{Version: BackupVersion, Stream: stream, Created: time.Now().UTC()}
	inbox := nc.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		return m, fmt.Errorf("backup %s: subscribe: %w", stream, err)
	}
	defer sub.Unsubscribe()
	req, _ := json.Marshal(map[string]any{"deliver_subject": inbox, "chunk_size": backupChunk})
	rctx, cancel := context.WithTimeout(ctx, backupAckWait)
	resp, err := nc.RequestWithContext(rctx, "$JS.API.STREAM.SNAPSHOT."+stream, req)
	cancel()
	if err != nil {
		return m, fmt.Errorf("backup %s: snapshot request: %w", stream, err)
	}
	var sr struct {
		apiError
		Config json.RawMessage `json:"config"`
		State  json.RawMessage `json:"state"`
	}
	if err := json.Unmarshal(resp.Data, &sr); err != nil {
		return m, fmt.Errorf("backup %s: snapshot answer: %w", stream, err)
	}
	if err := sr.err("backup " + stream + ": the server refused the snapshot"); err != nil {
		return m, err
	}
	var st streamState
	if err := json.Unmarshal(sr.State, &st); err != nil {
		return m, fmt.Errorf("backup %s: snapshot state: %w", stream, err)
	}
	m.Config, m.State = sr.Config, sr.State
	m.FirstSeq, m.LastSeq, m.Msgs = st.FirstSeq, st.LastSeq, st.Msgs

	if _, err := io.WriteString(w, backupMagic); err != nil {
		return m, fmt.Errorf("backup %s: write: %w", stream, err)
	}
	sum := sha256.New()
	out := io.MultiWriter(w, sum)
	for {
		cctx, cancel := context.WithTimeout(ctx, backupAckWait)
		msg, err := sub.NextMsgWithContext(cctx)
		cancel()
		if err != nil {
			return m, fmt.Errorf("backup %s: no snapshot data for %v after %d bytes: %w", stream, backupAckWait, m.SnapshotSize, err)
		}
		if len(msg.Data) == 0 {
			// The end: a status 204 (or none, for a snapshot shorter than
			// one chunk); anything else is the server's failure.
			if code := msg.Header.Get("Status"); code != "" && code != "204" {
				return m, fmt.Errorf("backup %s: the server ended the snapshot with %s %s", stream, code, msg.Header.Get("Description"))
			}
			break
		}
		if _, err := out.Write(msg.Data); err != nil {
			return m, fmt.Errorf("backup %s: write: %w", stream, err)
		}
		m.SnapshotSize += int64(len(msg.Data))
		if progress != nil {
			progress(m.SnapshotSize)
		}
		// The ack is the flow control: the server sends a window ahead.
		if msg.Reply != "" {
			if err := msg.Respond(nil); err != nil {
				return m, fmt.Errorf("backup %s: ack: %w", stream, err)
			}
		}
	}
	m.SnapshotSHA256 = hex.EncodeToString(sum.Sum(nil))
	if m.ViewsDigest, err = digestAt(ctx, m.LastSeq); err != nil {
		return m, fmt.Errorf("backup %s: views at seq %d: %w", stream, m.LastSeq, err)
	}
	if err := m.Validate(); err != nil {
		return m, fmt.Errorf("backup %s: %w", stream, err)
	}
	if _, err := w.Write(encodeManifest(m)); err != nil {
		return m, fmt.Errorf("backup %s: write: %w", stream, err)
	}
	return m, nil
}

// encodeManifest is the manifest and the trailer.
func encodeManifest(m BackupManifest) []byte {
	b, _ := json.Marshal(m)
	sum := sha256.Sum256(b)
	out := append(b, make([]byte, 8)...)
	binary.BigEndian.PutUint64(out[len(b):], uint64(len(b)))
	out = append(out, sum[:]...)
	return append(out, backupEndMagic...)
}

// ReadBackupManifest reads and checks the head, trailer and manifest of a
// backup file of size bytes. It does not read the snapshot; VerifyBackup
// does.
func ReadBackupManifest(r io.ReaderAt, size int64) (BackupManifest, error) {
	var m BackupManifest
	if size < int64(len(backupMagic)+backupTrailer) {
		return m, badBackup("%d bytes are too few for a backup", size)
	}
	head := make([]byte, len(backupMagic))
	if _, err := r.ReadAt(head, 0); err != nil {
		return m, fmt.Errorf("read backup: %w", err)
	}
	if string(head) != backupMagic {
		return m, badBackup("it does not start with %q", backupMagic[:len(backupMagic)-1])
	}
	tr := make([]byte, backupTrailer)
	if _, err := r.ReadAt(tr, size-int64(backupTrailer)); err != nil {
		return m, fmt.Errorf("read backup: %w", err)
	}
	if string(tr[8+sha256.Size:]) != backupEndMagic {
		return m, badBackup("its end marker is missing: the file was cut short or damaged")
	}
	n := binary.BigEndian.Uint64(tr[:8])
	room := uint64(size) - uint64(len(backupMagic)+backupTrailer)
	if n == 0 || n > maxManifest || n >= room {
		return m, badBackup("manifest length %d does not fit in the file", n)
	}
	b := make([]byte, n)
	if _, err := r.ReadAt(b, size-int64(backupTrailer)-int64(n)); err != nil {
		return m, fmt.Errorf("read backup: %w", err)
	}
	if sum := sha256.Sum256(b); !bytes.Equal(sum[:], tr[8:8+sha256.Size]) {
		return m, badBackup("the manifest's checksum does not match: the file is damaged")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, badBackup("manifest: %v", err)
	}
	if err := m.Validate(); err != nil {
		return m, err
	}
	if want := int64(room - n); m.SnapshotSize != want {
		return m, badBackup("the manifest says %d snapshot bytes, the file holds %d", m.SnapshotSize, want)
	}
	return m, nil
}

// snapshotSection is the snapshot part of a backup file.
func snapshotSection(r io.ReaderAt, m BackupManifest) *io.SectionReader {
	return io.NewSectionReader(r, int64(len(backupMagic)), m.SnapshotSize)
}

// VerifyBackup reads the whole file: its manifest, and the snapshot
// against the manifest's checksum.
func VerifyBackup(f *os.File) (BackupManifest, error) {
	fi, err := f.Stat()
	if err != nil {
		return BackupManifest{}, fmt.Errorf("backup %s: %w", f.Name(), err)
	}
	m, err := ReadBackupManifest(f, fi.Size())
	if err != nil {
		return m, fmt.Errorf("backup %s: %w", f.Name(), err)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, snapshotSection(f, m)); err != nil {
		return m, fmt.Errorf("backup %s: %w", f.Name(), err)
	}
	if hex.EncodeToString(sum.Sum(nil)) != m.SnapshotSHA256 {
		return m, fmt.Errorf("backup %s: %w", f.Name(), badBackup("the snapshot's checksum does not match its manifest: the file is damaged"))
	}
	return m, nil
}

// restoreAskWait bounds the wait for the answer to a restore request.
const restoreAskWait = 10 * time.Second

// RestoreBackup creates the stream of a verified backup (VerifyBackup) on
// the server of nc through JetStream's restore API. The stream must not
// exist.
func RestoreBackup(ctx context.Context, nc *nats.Conn, f io.ReaderAt, m BackupManifest) error {
	deliver, err := askRestore(ctx, nc, m)
	if err != nil {
		return err
	}
	sec := snapshotSection(f, m)
	chunk := make([]byte, backupChunk)
	for {
		n, rerr := io.ReadFull(sec, chunk)
		if n > 0 {
			ack, err := sendRestoreChunk(ctx, nc, deliver, chunk[:n])
			if err != nil {
				return fmt.Errorf("restore %s: send: %w", m.Stream, err)
			}
			if len(ack.Data) > 0 {
				var ae apiError
				_ = json.Unmarshal(ack.Data, &ae)
				if err := ae.err("restore " + m.Stream); err != nil {
					return err
				}
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("restore %s: read: %w", m.Stream, rerr)
		}
	}
	// The empty message ends the transfer; the answer is the stream's.
	done, err := nc.RequestWithContext(ctx, deliver, nil)
	if err != nil {
		return fmt.Errorf("restore %s: finish: %w", m.Stream, err)
	}
	var fin apiError
	if err := json.Unmarshal(done.Data, &fin); err != nil {
		return fmt.Errorf("restore %s: final answer: %w", m.Stream, err)
	}
	return fin.err("restore " + m.Stream)
}

// askRestore asks JetStream for a restore and returns the subject its
// chunks go to. The server answers the request at once; on a cluster, one
// of several racing restores may never be answered, and its caller tries
// again. A cluster that has just formed may also refuse it for a moment
// (no JetStream responder yet, 10005: no peer known to place the stream
// on, 10008: a meta leader change): nothing was created, so the request
// is sent again for a short, bounded while.
func askRestore(ctx context.Context, nc *nats.Conn, m BackupManifest) (string, error) {
	req, _ := json.Marshal(map[string]json.RawMessage{"config": m.Config, "state": m.State})
	for try := 0; ; try++ {
		actx, cancel := context.WithTimeout(ctx, restoreAskWait)
		resp, err := nc.RequestWithContext(actx, "$JS.API.STREAM.RESTORE."+m.Stream, req)
		cancel()
		var rr struct {
			apiError
			DeliverSubject string `json:"deliver_subject"`
		}
		transient := errors.Is(err, nats.ErrNoResponders)
		if err == nil {
			if err := json.Unmarshal(resp.Data, &rr); err != nil {
				return "", fmt.Errorf("restore %s: answer: %w", m.Stream, err)
			}
			if rr.Error == nil {
				return rr.DeliverSubject, nil
			}
			transient = rr.Error.ErrorCode == codeClusterNoPeers || rr.Error.ErrorCode == codeClusterNotAvail
			err = rr.err("the server refused")
		}
		if !transient || try == restoreAskRetries {
			return "", fmt.Errorf("restore %s: %w", m.Stream, err)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("restore %s: %w", m.Stream, ctx.Err())
		case <-time.After(restoreChunkRetryWait * 4):
		}
	}
}

// A restore refused while the cluster forms is asked again at most this
// often (200 ms apart: 8 s in all).
const restoreAskRetries = 40

// sendRestoreChunk sends one chunk of a restore and waits for its ack. On
// a cluster the server that took the restore may be another replica, and
// its interest in the deliver subject reaches this server's routes a moment
// later: "no responders" means the chunk went nowhere, so it is sent again
// for a short, bounded while.
func sendRestoreChunk(ctx context.Context, nc *nats.Conn, subject string, chunk []byte) (*nats.Msg, error) {
	for try := 0; ; try++ {
		cctx, cancel := context.WithTimeout(ctx, backupAckWait)
		ack, err := nc.RequestWithContext(cctx, subject, chunk)
		cancel()
		if !errors.Is(err, nats.ErrNoResponders) || try == restoreChunkRetries {
			return ack, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(restoreChunkRetryWait):
		}
	}
}

// A chunk nobody heard is sent again at most this often, this far apart.
const (
	restoreChunkRetries   = 40
	restoreChunkRetryWait = 50 * time.Millisecond
)

// ValidToken: s can be one token of a NATS subject or a stream name (not
// empty, no dot, wildcard or whitespace).
func ValidToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}
