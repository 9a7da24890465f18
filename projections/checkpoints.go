package projections

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
)

// A checkpoint is a snapshot of the views at a known sequence that is kept
// (unlike the one "views" snapshot, which is overwritten): a rebuild starts
// from one when the log's older events expired, and a replay to a past
// instant starts from the nearest one before it and folds only the tail.

const (
	checkpointPrefix     = "cp-"
	checkpointSeqHeader  = "Claimstream-Seq"
	checkpointTimeHeader = "Claimstream-Last-Event-Time"
)

// CheckpointInfo names a stored checkpoint: the sequence of the last event
// it holds and that event's time.
type CheckpointInfo struct {
	Seq  uint64
	Time time.Time
	Size uint64
}

// Checkpoints keeps checkpoints in a JetStream object store bucket with as
// many replicas as the event stream.
//
// A checkpoint's object is named for its sequence and the time of its
// last event (checkpointName), and the bucket is listed from the names
// alone: the server keeps the stream's subjects in memory, while reading
// the objects' records would load every block that holds one, each kept
// in the server's cache for seconds: with a checkpoint every hour, a
// start, a prune or a replay would hold the whole bucket's blocks. A
// deleted checkpoint's record is purged with it, so its name is gone.
type Checkpoints struct {
	js     jetstream.JetStream
	obj    jetstream.ObjectStore
	bucket string

	// stream is the bucket's stream, whose subjects name the objects:
	// looked up at its first use, not at open, so that opening asks the
	// cluster only to create the bucket (a lookup right after a create on
	// a loaded cluster can go unanswered while the bucket elects a leader,
	// and must not fail a start).
	streamMu sync.Mutex
	stream   jetstream.Stream

	// recent keeps the encoded checkpoints last saved or read, newest use
	// last: an incident's replays cluster around one time, and reading a
	// large pool's checkpoint back from the bucket costs as much as
	// decoding it. A checkpoint never changes once written.
	mu     sync.Mutex
	recent []encodedCheckpoint
	// names are the object names of the checkpoints listed or saved, by
	// sequence.
	names map[uint64]string
}

// recentCheckpoints bounds the cache (each is the size of the stored,
// compressed, views).
const recentCheckpoints = 3

type encodedCheckpoint struct {
	seq uint64
	b   []byte
}

func (c *Checkpoints) remember(seq uint64, b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.recent = slices.DeleteFunc(c.recent, func(e encodedCheckpoint) bool { return e.seq == seq })
	c.recent = append(c.recent, encodedCheckpoint{seq: seq, b: b})
	if n := len(c.recent); n > recentCheckpoints {
		c.recent = slices.Delete(c.recent, 0, n-recentCheckpoints)
	}
}

func (c *Checkpoints) recalled(seq uint64) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.recent {
		if e.seq == seq {
			return e.b
		}
	}
	return nil
}

// OpenCheckpoints opens (or creates) the checkpoint bucket.
func OpenCheckpoints(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*Checkpoints, error) {
	if bucket == "" {
		bucket = "claimstream-checkpoints"
	}
	if replicas == 0 {
		replicas = 1
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "claimstream checkpoints of the projected views",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("checkpoint bucket %s: %w", bucket, err)
	}
	return &Checkpoints{js: js, obj: obj, bucket: bucket}, nil
}

// bucketStream is the bucket's stream, looked up once.
func (c *Checkpoints) bucketStream(ctx context.Context) (jetstream.Stream, error) {
	c.streamMu.Lock()
	defer c.streamMu.Unlock()
	if c.stream != nil {
		return c.stream, nil
	}
	s, err := c.js.Stream(ctx, "OBJ_"+c.bucket)
	if err != nil {
		return nil, fmt.Errorf("checkpoint bucket %s: %w", c.bucket, err)
	}
	c.stream = s
	return s, nil
}

// checkpointTimeLayout is the time in a checkpoint's name: fixed width,
// no colons.
const checkpointTimeLayout = "20060102T150405.000000000Z"

// checkpointName is the object name of the checkpoint at seq whose last
// event happened at last: "cp-" + 20 digits of seq + "-" + the time.
func checkpointName(seq uint64, last time.Time) string {
	return fmt.Sprintf("%s%020d-%s", checkpointPrefix, seq, last.UTC().Format(checkpointTimeLayout))
}

// legacyCheckpointName is the name earlier versions gave the checkpoint
// at seq; its time is in its record only.
func legacyCheckpointName(seq uint64) string { return fmt.Sprintf("%s%020d", checkpointPrefix, seq) }

// parseCheckpointName reads a name checkpointName wrote; legacy is a
// name legacyCheckpointName wrote, whose time is not in it.
func parseCheckpointName(name string) (seq uint64, last time.Time, legacy, ok bool) {
	rest, found := strings.CutPrefix(name, checkpointPrefix)
	if !found || len(rest) < 20 {
		return 0, time.Time{}, false, false
	}
	seq, err := strconv.ParseUint(rest[:20], 10, 64)
	if err != nil {
		return 0, time.Time{}, false, false
	}
	if len(rest) == 20 {
		return seq, time.Time{}, true, true
	}
	if rest[20] != '-' {
		return 0, time.Time{}, false, false
	}
	last, err = time.Parse(checkpointTimeLayout, rest[21:])
	// time.Parse takes other spellings of the same time (a comma before
	// the fraction): only the name this writer gives it is a checkpoint's.
	if err != nil || name != checkpointName(seq, last) {
		return 0, time.Time{}, false, false
	}
	return seq, last, false, true
}

// nameOf is the object name of the checkpoint at seq, as listed or saved;
// one not seen yet is looked for in a list of the bucket.
func (c *Checkpoints) nameOf(ctx context.Context, seq uint64) (string, error) {
	if name, ok := c.knownName(seq); ok {
		return name, nil
	}
	if _, err := c.List(ctx); err != nil {
		return "", err
	}
	if name, ok := c.knownName(seq); ok {
		return name, nil
	}
	return legacyCheckpointName(seq), nil
}

func (c *Checkpoints) knownName(seq uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	name, ok := c.names[seq]
	return name, ok
}

func (c *Checkpoints) setName(seq uint64, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.names == nil {
		c.names = map[uint64]string{}
	}
	c.names[seq] = name
}

// Save stores the views st, whose last event happened at last.
func (c *Checkpoints) Save(ctx context.Context, st *State, last time.Time) (CheckpointInfo, error) {
	b, seq, err := encodeSnapshot(st)
	if err != nil {
		return CheckpointInfo{}, err
	}
	return c.save(ctx, b, seq, last)
}

func (c *Checkpoints) save(ctx context.Context, b []byte, seq uint64, last time.Time) (CheckpointInfo, error) {
	name := checkpointName(seq, last)
	_, err := c.obj.Put(ctx, jetstream.ObjectMeta{
		Name: name,
		Headers: map[string][]string{
			checkpointSeqHeader:  {strconv.FormatUint(seq, 10)},
			checkpointTimeHeader: {last.UTC().Format(time.RFC3339Nano)},
		},
	}, bytes.NewReader(b))
	if err != nil {
		return CheckpointInfo{}, fmt.Errorf("write checkpoint at seq %d: %w", seq, err)
	}
	c.setName(seq, name)
	c.remember(seq, b)
	return CheckpointInfo{Seq: seq, Time: last.UTC(), Size: uint64(len(b))}, nil
}

// List returns the stored checkpoints, oldest first. Size is known only
// of a checkpoint named as earlier versions named them, whose record is
// read for its time.
func (c *Checkpoints) List(ctx context.Context) ([]CheckpointInfo, error) {
	names, err := c.objectNames(ctx)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []CheckpointInfo
	for _, name := range names {
		seq, at, legacy, ok := parseCheckpointName(name)
		if !ok {
			continue
		}
		if legacy {
			info, err := c.legacyInfo(ctx, name)
			if err != nil {
				return nil, err
			}
			if info == nil {
				continue
			}
			out = append(out, *info)
			continue
		}
		c.setName(seq, name)
		out = append(out, CheckpointInfo{Seq: seq, Time: at})
	}
	slices.SortFunc(out, func(a, b CheckpointInfo) int { return compareSeq(a.Seq, b.Seq) })
	return out, nil
}

// metaPrefix is the subjects of the bucket's object records, one per
// object: the prefix, then the object's name in URL-safe base64.
func (c *Checkpoints) metaPrefix() string { return "$O." + c.bucket + ".M." }

// objectNames are the names of the bucket's objects, from the stream's
// subjects: no record is read.
func (c *Checkpoints) objectNames(ctx context.Context) ([]string, error) {
	stream, err := c.bucketStream(ctx)
	if err != nil {
		return nil, err
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(c.metaPrefix()+">"))
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		enc, ok := strings.CutPrefix(subj, c.metaPrefix())
		if !ok {
			continue
		}
		name, err := base64.URLEncoding.DecodeString(enc)
		if err != nil {
			continue
		}
		names = append(names, string(name))
	}
	return names, nil
}

// legacyInfo reads the record of a checkpoint an earlier version named:
// nil when it is deleted (its record, left by the earlier version's
// delete, is purged so it is not read again).
func (c *Checkpoints) legacyInfo(ctx context.Context, name string) (*CheckpointInfo, error) {
	in, err := c.obj.GetInfo(ctx, name, jetstream.GetObjectInfoShowDeleted())
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", name, err)
	}
	if in.Deleted {
		// Best effort: a record left is read again at the next list.
		_ = c.purgeRecord(ctx, name)
		return nil, nil
	}
	seq, err := strconv.ParseUint(in.Headers.Get(checkpointSeqHeader), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: bad %s header: %w", in.Name, checkpointSeqHeader, err)
	}
	at, err := time.Parse(time.RFC3339Nano, in.Headers.Get(checkpointTimeHeader))
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: bad %s header: %w", in.Name, checkpointTimeHeader, err)
	}
	c.setName(seq, name)
	// Renamed as this version names checkpoints, so that no later list
	// reads its record: a record written with its chunks lies in one of
	// the bucket's large blocks, which the server loads whole to read it.
	// Best effort: another replica may be renaming it too, and a record
	// left is read again at the next list.
	renamed := checkpointName(seq, at)
	err = c.obj.UpdateMeta(ctx, name, jetstream.ObjectMeta{Name: renamed, Description: in.Description, Headers: in.Headers, Metadata: in.Metadata})
	switch {
	case err == nil:
		c.setName(seq, renamed)
	case errors.Is(err, jetstream.ErrObjectAlreadyExists):
		// A rename writes the new record, then purges the old one: one
		// that stopped between the two left both. The new name is listed
		// by itself; the old record goes.
		c.setName(seq, renamed)
		c.dropRenamed(ctx, name, renamed, in.NUID)
		return nil, nil
	}
	return &CheckpointInfo{Seq: seq, Time: at, Size: in.Size}, nil
}

// dropRenamed removes the legacy record name, whose checkpoint is also
// stored as renamed. Sharing renamed's chunks, only its record is purged;
// otherwise it is a checkpoint of its own and is deleted with its chunks.
// Best effort: a record left is read again at the next list.
func (c *Checkpoints) dropRenamed(ctx context.Context, name, renamed, nuid string) {
	if other, err := c.obj.GetInfo(ctx, renamed); err == nil && other.NUID != nuid {
		if err := c.obj.Delete(ctx, name); err != nil {
			return
		}
	}
	_ = c.purgeRecord(ctx, name)
}

// purgeRecord removes a deleted object's record, so its name is no
// longer listed.
func (c *Checkpoints) purgeRecord(ctx context.Context, name string) error {
	stream, err := c.bucketStream(ctx)
	if err != nil {
		return err
	}
	return stream.Purge(ctx, jetstream.WithPurgeSubject(c.metaPrefix()+base64.URLEncoding.EncodeToString([]byte(name))))
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Load reads the views of the checkpoint at seq.
func (c *Checkpoints) Load(ctx context.Context, seq uint64) (*State, error) {
	b := c.recalled(seq)
	if b == nil {
		name, err := c.nameOf(ctx, seq)
		if err != nil {
			return nil, fmt.Errorf("read checkpoint at seq %d: %w", seq, err)
		}
		b, err = readObject(ctx, c.js, c.obj, name)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			// Listed but deleted: a delete stopped before it purged the
			// record. Purged now, it is not listed again.
			_ = c.purgeRecord(ctx, name)
		}
		if err != nil {
			return nil, fmt.Errorf("read checkpoint at seq %d: %w", seq, err)
		}
		c.remember(seq, b)
	}
	st, err := DecodeSnapshot(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint at seq %d: %w", seq, err)
	}
	return st, nil
}

// Delete removes the checkpoint at seq.
func (c *Checkpoints) Delete(ctx context.Context, seq uint64) error {
	c.mu.Lock()
	c.recent = slices.DeleteFunc(c.recent, func(e encodedCheckpoint) bool { return e.seq == seq })
	c.mu.Unlock()
	name, err := c.nameOf(ctx, seq)
	if err != nil {
		return fmt.Errorf("delete checkpoint at seq %d: %w", seq, err)
	}
	if err := c.obj.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("delete checkpoint at seq %d: %w", seq, err)
	}
	// The delete leaves a record that says so: purged, the name is no
	// longer listed.
	if err := c.purgeRecord(ctx, name); err != nil {
		return fmt.Errorf("delete checkpoint at seq %d: its record: %w", seq, err)
	}
	c.mu.Lock()
	delete(c.names, seq)
	c.mu.Unlock()
	return nil
}

// CheckpointPolicy is the checkpoint schedule, in one place.
type CheckpointPolicy struct {
	// Every: a checkpoint is due after this many events (default 10,000:
	// a replay then folds at most that many after its checkpoint, which
	// keeps it within a second on a 10,000-slot pool).
	Every uint64
	// Interval: a checkpoint is due this long after the last one when
	// events came since (default 1h).
	Interval time.Duration
	// Retention is the log's MaxAge (0: forever); daily checkpoints are
	// kept that long.
	Retention time.Duration
	// HourlyFor is how long hourly checkpoints are kept (default a week).
	HourlyFor time.Duration
}

func (p CheckpointPolicy) withDefaults() CheckpointPolicy {
	if p.Every == 0 {
		p.Every = 10_000
	}
	if p.Interval == 0 {
		p.Interval = time.Hour
	}
	if p.HourlyFor == 0 {
		p.HourlyFor = 7 * 24 * time.Hour
	}
	return p
}

// CheckpointDue says whether views at seq need a checkpoint, given the
// newest one (zero: none) and when it was taken (takenAt, the clock's time
// at the save).
func (p CheckpointPolicy) CheckpointDue(newest CheckpointInfo, takenAt time.Time, seq uint64, now time.Time) bool {
	p = p.withDefaults()
	if seq == 0 || seq <= newest.Seq {
		return false
	}
	if newest.Seq == 0 && takenAt.IsZero() {
		return true
	}
	return seq-newest.Seq >= p.Every || now.Sub(takenAt) >= p.Interval
}

// Prune returns the sequences of the checkpoints to delete: of those whose
// last event is within HourlyFor of now, the newest of each hour is kept;
// within the retention, the newest of each day; the newest checkpoint is
// always kept (a rebuild of a truncated log starts from it). With no
// retention every daily checkpoint is kept.
func (p CheckpointPolicy) Prune(cps []CheckpointInfo, now time.Time) []uint64 {
	p = p.withDefaults()
	if len(cps) == 0 {
		return nil
	}
	sorted := slices.Clone(cps)
	slices.SortFunc(sorted, func(a, b CheckpointInfo) int { return compareSeq(b.Seq, a.Seq) })
	kept := map[string]bool{}
	var drop []uint64
	for i, cp := range sorted {
		age := now.Sub(cp.Time)
		var bucket string
		switch {
		case age <= p.HourlyFor:
			bucket = "h" + cp.Time.UTC().Truncate(time.Hour).Format(time.RFC3339)
		case p.Retention == 0 || age <= p.Retention:
			bucket = "d" + cp.Time.UTC().Format(time.DateOnly)
		case i == 0:
			continue
		default:
			drop = append(drop, cp.Seq)
			continue
		}
		if kept[bucket] && i > 0 {
			drop = append(drop, cp.Seq)
			continue
		}
		kept[bucket] = true
	}
	slices.Sort(drop)
	return drop
}

// TruncatedLogError is why views cannot be built: the log's older events
// expired and no checkpoint covers them.
type TruncatedLogError struct {
	First uint64
	// NewestCheckpoint is the newest checkpoint's sequence (0: none).
	NewestCheckpoint uint64
	// Why adds what else was tried (an unreadable snapshot or checkpoint).
	Why string
}

func (e *TruncatedLogError) Error() string {
	cp := "there is no checkpoint"
	if e.NewestCheckpoint > 0 {
		cp = fmt.Sprintf("the newest checkpoint ends at seq %d", e.NewestCheckpoint)
	}
	msg := fmt.Sprintf("the event log starts at seq %d (the events before it expired or were lost) and %s: no checkpoint of this version holds seq %d, so the views cannot be built without folding a truncated log; restore the checkpoint bucket or the data dir from a backup", e.First, cp, e.First-1)
	if e.Why != "" {
		msg += " (" + e.Why + ")"
	}
	return msg
}

// coveringCheckpoint loads the newest checkpoint that holds every expired
// event of a log with bounds b (seq >= First-1) and is not past its end.
func (c *Checkpoints) coveringCheckpoint(ctx context.Context, b eventlog.Bounds, atOrBefore func(CheckpointInfo) bool) (*State, CheckpointInfo, error) {
	var newest uint64
	var why []string
	var cps []CheckpointInfo
	if c != nil {
		var err error
		cps, err = c.List(ctx)
		if err != nil {
			return nil, CheckpointInfo{}, err
		}
	}
	for i := len(cps) - 1; i >= 0; i-- {
		cp := cps[i]
		if cp.Seq > b.Last || (atOrBefore != nil && !atOrBefore(cp)) {
			continue
		}
		newest = max(newest, cp.Seq)
		if cp.Seq+1 < b.First {
			break
		}
		st, err := c.Load(ctx, cp.Seq)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		return st, cp, nil
	}
	return nil, CheckpointInfo{}, &TruncatedLogError{First: b.First, NewestCheckpoint: newest, Why: strings.Join(why, "; ")}
}

// ReplayUntil rebuilds the views as they were at t: from the nearest
// checkpoint whose last event is at or before t (when cps is set), then
// every event up to t. Over a truncated log with no such checkpoint it
// returns a *TruncatedLogError rather than a fold of the remaining tail.
func ReplayUntil(ctx context.Context, store *eventlog.Store, cps *Checkpoints, t time.Time) (*State, error) {
	st, err := replayStart(ctx, store, cps, func(cp CheckpointInfo) bool { return !cp.Time.After(t) })
	if err != nil {
		return nil, err
	}
	stop := errors.New("stop")
	err = store.Read(ctx, st.Seq+1, 0, func(e events.Event) error {
		if e.Data != nil && e.Time.After(t) {
			return stop
		}
		_ = Evolve(st, e)
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return nil, err
	}
	return st, nil
}

// ReplayTo rebuilds the views up to seq upTo, from the nearest checkpoint
// at or before it.
func ReplayTo(ctx context.Context, store *eventlog.Store, cps *Checkpoints, upTo uint64) (*State, error) {
	st, err := replayStart(ctx, store, cps, func(cp CheckpointInfo) bool { return cp.Seq <= upTo })
	if err != nil {
		return nil, err
	}
	if st.Seq >= upTo {
		return st, nil
	}
	err = store.Read(ctx, st.Seq+1, upTo, func(e events.Event) error {
		_ = Evolve(st, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// replayStart is the state a replay folds its tail into: the newest
// checkpoint ok accepts, or an empty state when the log is whole from seq 1
// and no checkpoint fits.
func replayStart(ctx context.Context, store *eventlog.Store, cps *Checkpoints, ok func(CheckpointInfo) bool) (*State, error) {
	b, err := store.Bounds(ctx)
	if err != nil {
		return nil, err
	}
	st, _, err := cps.coveringCheckpoint(ctx, b, ok)
	var te *TruncatedLogError
	switch {
	case err == nil:
		return st, nil
	case errors.As(err, &te) && !b.Truncated():
		return NewState(), nil
	case errors.As(err, &te):
		return nil, fmt.Errorf("cannot replay to that point: events before seq %d expired and no checkpoint at or before it holds them: %w", b.First, err)
	}
	return nil, err
}

// OldestCovering loads the oldest checkpoint that still holds every
// expired event of a log with bounds b: the state nearest the expiry, which
// an audit of expired history tells. It returns a nil state when none does.
func (c *Checkpoints) OldestCovering(ctx context.Context, b eventlog.Bounds) (*State, CheckpointInfo, error) {
	cps, err := c.List(ctx)
	if err != nil {
		return nil, CheckpointInfo{}, err
	}
	for _, cp := range cps {
		if cp.Seq+1 < b.First || cp.Seq > b.Last {
			continue
		}
		st, err := c.Load(ctx, cp.Seq)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			// Listed but deleted (a delete stopped before it purged the
			// record): not in the bucket, so not the oldest.
			continue
		}
		if err != nil {
			return nil, CheckpointInfo{}, err
		}
		return st, cp, nil
	}
	return nil, CheckpointInfo{}, nil
}
