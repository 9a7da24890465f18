package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/claimstream/claimstream/internal/claimname"
)

// ClaimName names a new claim on slot: <slot>-<6 hex>, the suffix a digest
// of the slot, the slot's last sequence and the request time, so a decider
// stays pure and two claims of one slot never share a name (each new claim
// comes after at least one more event on the slot).
func ClaimName(slot string, slotSeq uint64, now time.Time) string {
	h := sha256.Sum256([]byte(slot + "\x00" + strconv.FormatUint(slotSeq, 10) + "\x00" + now.UTC().Format(time.RFC3339Nano)))
	return claimname.Of(slot, uint32(h[0])<<16|uint32(h[1])<<8|uint32(h[2]))
}

// JobName is the deterministic name of a lifecycle Job: <claim>-<op>-<n>
// (op "start" or "stop"), so a restarted reactor finds the Job it made and a
// duplicate create is AlreadyExists. Kept within the 63 characters of a label
// value; a longer name is shortened with a digest.
func JobName(claim, op string, n int) string {
	name := fmt.Sprintf("%s-%s-%d", claim, op, n)
	if len(name) <= 63 {
		return name
	}
	h := sha256.Sum256([]byte(name))
	suffix := fmt.Sprintf("-%s-%s-%d", hex.EncodeToString(h[:4]), op, n)
	return strings.TrimRight(claim[:63-len(suffix)], ".-") + suffix
}

// SlotJobName names a shutdown Job fired for a slot with no claim (the
// input law): the slot and the sequence of the slot event it acts on.
func SlotJobName(slot string, slotSeq uint64) string {
	return JobName(slot, "stop", int(slotSeq))
}
