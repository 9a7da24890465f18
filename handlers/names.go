package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

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

// AnnotationSlot carries a slot's full name on the objects made for it
// (lifecycle Jobs and their pods); the LabelSlot label carries
// LabelValue(slot), which is the name itself up to 63 characters.
const AnnotationSlot = "claimstream.dev/slot"

// maxLabelValue is Kubernetes' bound on a label value.
const maxLabelValue = validation.LabelValueMaxLength

// LabelValue makes a name a valid label value: the name itself when it is
// one (a slot or group name of up to 63 characters), else its first
// characters, a dash and 10 hex digits of its digest, 63 characters at
// most, starting and ending with a letter or digit. Two names that differ
// only past the kept prefix still get different values.
func LabelValue(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	h := sha256.Sum256([]byte(name))
	digest := hex.EncodeToString(h[:5])
	keep := []byte(name)
	for i, c := range keep {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			keep[i] = '-'
		}
	}
	prefix := string(keep[:min(len(keep), maxLabelValue-len(digest)-1)])
	prefix = strings.TrimLeft(strings.TrimRight(prefix, "-_."), "-_.")
	if prefix == "" {
		return digest
	}
	return prefix + "-" + digest
}

// SlotOfJob is the slot a lifecycle Job was made for: its AnnotationSlot,
// else (a Job made before the annotation) its LabelSlot.
func SlotOfJob(labels, annotations map[string]string) string {
	if s := annotations[AnnotationSlot]; s != "" {
		return s
	}
	return labels[LabelSlot]
}
