package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxCommandBody bounds a command's JSON body.
const maxCommandBody = 64 << 10

// errEmptyBody is a body with no JSON value at all.
var errEmptyBody = errors.New("empty body")

// decodeBody reads r's body as exactly one JSON object into dst: unknown
// fields, and anything after the value but white space (a second object,
// a stray word), are errors, so a body is acted on only as it was meant.
// An empty body is errEmptyBody.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxCommandBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		if errors.Is(err, io.EOF) {
			return errEmptyBody
		}
		return err
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("trailing data after the JSON object at byte %d: send one object", dec.InputOffset())
	}
	return nil
}
