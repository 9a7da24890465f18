package projections

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// ViewsDigest is the SHA-256 of the views' JSON: two States folded from
// the same events have the same digest (encoding/json writes map keys in
// order), so a restored log is checked against the one it was copied from.
func ViewsDigest(st *State) (string, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("views digest: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
