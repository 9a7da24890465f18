package handlers

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

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
