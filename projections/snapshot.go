package projections

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/nats-io/nats.go/jetstream"
)

// SnapshotVersion changes whenever the shape of State or the fold changes;
// a snapshot of another version is ignored and the views are rebuilt from
// the log. 2: claims carry their trace context, expected and joined hosts
// and drains. 3: a second live claim supersedes the older in the fold;
// claims count their stop Jobs and record a deleted failed instance;
// timeline steps coalesce; slots record the input law's pause and Node
// deletes.
const SnapshotVersion = 3

// snapshotObject is the object name of the newest snapshot.
const snapshotObject = "views"

// Snapshots keeps the newest snapshot of the views in a JetStream object
// store bucket (objects are chunked, so a large pool's views fit; a KV value
// is capped at the server's max payload).
type Snapshots struct {
	js  jetstream.JetStream
	obj jetstream.ObjectStore
}

// OpenSnapshots opens (or creates) the bucket on one server.
func OpenSnapshots(ctx context.Context, js jetstream.JetStream, bucket string) (*Snapshots, error) {
	return OpenSnapshotsReplicated(ctx, js, bucket, 1)
}

// OpenSnapshotsReplicated opens (or creates) the bucket kept on replicas
// servers (the event log's replica count).
func OpenSnapshotsReplicated(ctx context.Context, js jetstream.JetStream, bucket string, replicas int) (*Snapshots, error) {
	if replicas < 1 {
		replicas = 1
	}
	if bucket == "" {
		bucket = "claimstream-snapshots"
	}
	obj, err := js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "claimstream snapshots of the projected views",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot bucket %s: %w", bucket, err)
	}
	return &Snapshots{js: js, obj: obj}, nil
}

type snapshotEnvelope struct {
	Version int             `json:"version"`
	Seq     uint64          `json:"seq"`
	State   json.RawMessage `json:"state"`
}

func encodeSnapshot(s *State) ([]byte, uint64, error) {
	return encodeSnapshotParts(s, nil)
}

// encodeSnapshotParts is the stored form of the views s and the parts of
// the projections (snapshotframe.go), written as they are encoded: what
// is held is the compressed frame, not the views' JSON nor a part whole.
func encodeSnapshotParts(s *State, parts []snapshotPart) ([]byte, uint64, error) {
	b, err := storeFrame(func(w io.Writer) error { return writeViews(w, s) }, parts)
	return b, s.Seq, err
}

// writeViews writes the views' part, a snapshotEnvelope of s as
// json.Marshal writes it, to w entry by entry, so the JSON of every slot
// and claim is never held at once.
func writeViews(w io.Writer, s *State) error {
	j := &jsonWriter{w: w}
	j.enc = json.NewEncoder(&j.buf)
	j.raw(fmt.Sprintf(`{"version":%d,"seq":%d,"state":{"seq":`, SnapshotVersion, s.Seq))
	j.value(s.Seq)
	j.raw(`,"groups":`)
	writeJSONMap(j, s.Groups)
	j.raw(`,"slots":`)
	writeJSONMap(j, s.Slots)
	j.raw(`,"claims":`)
	writeJSONMap(j, s.Claims)
	j.raw(`,"stats":`)
	j.value(s.Stats)
	if s.Leader != nil {
		j.raw(`,"leader":`)
		j.value(s.Leader)
	}
	j.raw(`}}`)
	if j.err != nil {
		return fmt.Errorf("encode views: %w", j.err)
	}
	return nil
}

// viewsJSON is the views' part of s, whole.
func viewsJSON(s *State) ([]byte, error) {
	var b bytes.Buffer
	err := writeViews(&b, s)
	return b.Bytes(), err
}

// jsonWriter writes JSON values one at a time; its first error sticks.
type jsonWriter struct {
	w   io.Writer
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

func (j *jsonWriter) raw(s string) {
	if j.err == nil {
		_, j.err = io.WriteString(j.w, s)
	}
}

// value writes v as json.Marshal encodes it (Encode adds a newline,
// which is left out).
func (j *jsonWriter) value(v any) {
	if j.err != nil {
		return
	}
	j.buf.Reset()
	if j.err = j.enc.Encode(v); j.err == nil {
		_, j.err = j.w.Write(j.buf.Bytes()[:j.buf.Len()-1])
	}
}

// writeJSONMap writes m as json.Marshal encodes a map: its keys in
// order, a nil map as null.
func writeJSONMap[V any](j *jsonWriter, m map[string]V) {
	if m == nil {
		j.raw("null")
		return
	}
	j.raw("{")
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			j.raw(",")
		}
		j.value(k)
		j.raw(":")
		j.value(m[k])
	}
	j.raw("}")
}

// DecodeSnapshot reads the views of a snapshot written by this version;
// the parts after them must be whole too.
func DecodeSnapshot(b []byte) (*State, error) {
	st, s, err := openSnapshotStream(b)
	if err != nil {
		return nil, err
	}
	if err := s.skipParts(); err != nil {
		return nil, err
	}
	return st, nil
}

// decodeViews reads the views' part of a snapshot.
func decodeViews(b []byte) (*State, error) {
	if st, ok, err := decodeSnapshotInOrder(b); ok {
		return st, err
	}
	return decodeSnapshotEnvelope(b)
}

// decodeSnapshotInOrder reads a snapshot laid out as encodeSnapshot writes
// it (version, seq, then state): the state straight from b, where
// json.Unmarshal of the envelope and then of its state would scan a large
// pool's views twice more (a third of a replay from a checkpoint). ok is
// false when the layout differs; the caller then reads the envelope whole.
func decodeSnapshotInOrder(b []byte) (st *State, ok bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false, nil
	}
	var env snapshotEnvelope
	for _, want := range []string{"version", "seq"} {
		key, err := dec.Token()
		if err != nil || key != want {
			return nil, false, nil
		}
		field := any(&env.Version)
		if want == "seq" {
			field = &env.Seq
		}
		if err := dec.Decode(field); err != nil {
			return nil, false, nil
		}
	}
	if key, err := dec.Token(); err != nil || key != "state" {
		return nil, false, nil
	}
	if env.Version != SnapshotVersion {
		return nil, true, fmt.Errorf("snapshot version %d, this build reads %d", env.Version, SnapshotVersion)
	}
	// The state is the rest up to the envelope's closing brace, decoded
	// from b itself: a Decoder would first copy all of it into a buffer
	// of its own.
	rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")
	whole := bytes.TrimRight(rest, " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' || len(whole) < 2 || whole[len(whole)-1] != '}' {
		return nil, false, nil
	}
	st = NewState()
	if err := json.Unmarshal(whole[1:len(whole)-1], st); err != nil {
		// Not the state alone (another key after it, say): the caller
		// reads the envelope whole and names what is wrong.
		return nil, false, nil
	}
	if st.Seq != env.Seq {
		return nil, true, fmt.Errorf("snapshot says seq %d, its state %d", env.Seq, st.Seq)
	}
	if err := st.reindexDecoded(); err != nil {
		return nil, true, err
	}
	return st, true, nil
}

// reindexDecoded checks views decoded from a snapshot and rebuilds their
// lookups: a null group, slot or claim is refused, not folded on.
func (s *State) reindexDecoded() error {
	if name, ok := nullEntry(s.Groups); ok {
		return fmt.Errorf("decode snapshot state: group %q is null", name)
	}
	if name, ok := nullEntry(s.Slots); ok {
		return fmt.Errorf("decode snapshot state: slot %q is null", name)
	}
	if name, ok := nullEntry(s.Claims); ok {
		return fmt.Errorf("decode snapshot state: claim %q is null", name)
	}
	s.Reindex()
	return nil
}

func nullEntry[V any](m map[string]*V) (string, bool) {
	for name, v := range m {
		if v == nil {
			return name, true
		}
	}
	return "", false
}

func decodeSnapshotEnvelope(b []byte) (*State, error) {
	var env snapshotEnvelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	if env.Version != SnapshotVersion {
		return nil, fmt.Errorf("snapshot version %d, this build reads %d", env.Version, SnapshotVersion)
	}
	st := NewState()
	if err := json.Unmarshal(env.State, st); err != nil {
		return nil, fmt.Errorf("decode snapshot state: %w", err)
	}
	if st.Seq != env.Seq {
		return nil, fmt.Errorf("snapshot says seq %d, its state %d", env.Seq, st.Seq)
	}
	if err := st.reindexDecoded(); err != nil {
		return nil, err
	}
	return st, nil
}

func (s *Snapshots) save(ctx context.Context, b []byte, seq uint64) error {
	_, err := s.obj.Put(ctx, jetstream.ObjectMeta{
		Name:    snapshotObject,
		Headers: map[string][]string{"Claimstream-Seq": {fmt.Sprint(seq)}},
	}, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("write snapshot at seq %d: %w", seq, err)
	}
	return nil
}

// Load returns the views of the newest snapshot, or nil when there is none.
func (s *Snapshots) Load(ctx context.Context) (*State, error) {
	st, parts, err := s.open(ctx)
	if err != nil || st == nil {
		return nil, err
	}
	if err := parts.finish(); err != nil {
		return nil, err
	}
	return st, nil
}

// open reads the newest snapshot's views (nil: none) and returns the
// stream of the projections' parts after them, to be finished.
func (s *Snapshots) open(ctx context.Context) (*State, *snapshotStream, error) {
	b, err := readObject(ctx, s.js, s.obj, snapshotObject)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read snapshot: %w", err)
	}
	return openSnapshotStream(b)
}

// Canonical is the state as canonical JSON: map keys sorted, so two equal
// views are equal byte for byte.
func Canonical(s *State) ([]byte, error) {
	return json.MarshalIndent(s, "", " ")
}
