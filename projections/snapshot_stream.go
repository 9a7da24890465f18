package projections

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// decodeViewsFrom reads the views' part (a snapshotEnvelope) from r as
// json.Unmarshal of the envelope and then of its state would, but with
// the state's groups, slots and claims decoded entry by entry: the views'
// JSON is never held whole, only the entry being decoded. r must end
// where the part ends.
func decodeViewsFrom(r io.Reader) (*State, error) {
	dec := json.NewDecoder(r)
	if err := wantDelim(dec, '{'); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	var env snapshotEnvelope
	var st *State
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return nil, fmt.Errorf("decode snapshot: %w", err)
		}
		switch {
		case strings.EqualFold(key, "version"):
			err = dec.Decode(&env.Version)
		case strings.EqualFold(key, "seq"):
			err = dec.Decode(&env.Seq)
		case strings.EqualFold(key, "state"):
			// A second state replaces the first, as the envelope's
			// json.RawMessage would.
			st = NewState()
			err = decodeStateFrom(dec, st)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return nil, fmt.Errorf("decode snapshot: %w", err)
		}
	}
	if err := wantDelim(dec, '}'); err != nil {
		return nil, fmt.Errorf("decode snapshot: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("decode snapshot: %w", cmp.Or(err, errors.New("more after the envelope")))
	}
	if env.Version != SnapshotVersion {
		return nil, fmt.Errorf("snapshot version %d, this build reads %d", env.Version, SnapshotVersion)
	}
	if st == nil {
		return nil, errors.New("decode snapshot state: the snapshot holds no state")
	}
	if st.Seq != env.Seq {
		return nil, fmt.Errorf("snapshot says seq %d, its state %d", env.Seq, st.Seq)
	}
	if err := st.reindexDecoded(); err != nil {
		return nil, err
	}
	return st, nil
}

// decodeStateFrom decodes the state object next in dec into st, as
// json.Unmarshal into st would.
func decodeStateFrom(dec *json.Decoder, st *State) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil // null leaves st as it is
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("the state is %v, not an object", tok)
	}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		switch key {
		case "groups":
			err = decodeMapFrom(dec, &st.Groups)
		case "slots":
			err = decodeMapFrom(dec, &st.Slots)
		case "claims":
			err = decodeMapFrom(dec, &st.Claims)
		default:
			// Any other field, as json.Unmarshal of the state would
			// decode it (its name matched without regard to case).
			var raw json.RawMessage
			if err = dec.Decode(&raw); err == nil {
				var field []byte
				if field, err = json.Marshal(map[string]json.RawMessage{key: raw}); err == nil {
					err = json.Unmarshal(field, st)
				}
			}
		}
		if err != nil {
			return err
		}
	}
	return wantDelim(dec, '}')
}

// decodeMapFrom decodes the object next in dec into *m entry by entry, as
// json.Unmarshal would: null makes *m nil, an object adds to it.
func decodeMapFrom[V any](dec *json.Decoder, m *map[string]*V) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*m = nil
		return nil
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("a map is %v, not an object", tok)
	}
	if *m == nil {
		*m = map[string]*V{}
	}
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return err
		}
		var v *V
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("%q: %w", key, err)
		}
		(*m)[key] = v
	}
	return wantDelim(dec, '}')
}

func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("a key is %v", tok)
	}
	return key, nil
}

func wantDelim(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("%v where %v was expected", tok, d)
	}
	return nil
}
