package handlers_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"pgregory.net/rapid"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
)

// slotName draws a valid slot name: a DNS-1123 subdomain of up to 253
// characters, often past the 63 of a label value.
func slotName(t *rapid.T, label string) string {
	n := rapid.IntRange(1, 6).Draw(t, label+"-labels")
	parts := make([]string, n)
	alnum := []rune("abcdefghijklmnopqrstuvwxyz0123456789")
	for i := range parts {
		// Lengths are drawn outright so that long names are common.
		size := rapid.IntRange(1, 63).Draw(t, label+"-size")
		mid := rapid.StringOfN(rapid.RuneFrom(append([]rune("-"), alnum...)), size-1, size-1, -1).Draw(t, label+"-mid")
		parts[i] = rapid.StringOfN(rapid.RuneFrom(alnum), 1, 1, -1).Draw(t, label+"-first") + mid
		if size > 1 {
			parts[i] = parts[i][:size-1] + rapid.StringOfN(rapid.RuneFrom(alnum), 1, 1, -1).Draw(t, label+"-last")
		}
	}
	name := strings.Join(parts, ".")
	if len(name) > 253 {
		name = strings.TrimRight(name[:253], "-.")
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Skipf("not a subdomain: %q", name)
	}
	return name
}

func noErrs(t *rapid.T, what, v string, errs []string) {
	t.Helper()
	if len(errs) > 0 {
		t.Fatalf("%s %q: %v", what, v, errs)
	}
}

// Every name a slot's name reaches in Kubernetes metadata is valid there:
// label values, Job names (which are also their pods' label values), for
// any valid slot name.
func TestNamesAreValidKubernetesNames(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		slot := slotName(t, "slot")
		other := slotName(t, "other")
		now := time.Unix(rapid.Int64Range(0, 1<<40).Draw(t, "now"), 0)
		seq := rapid.Uint64Range(0, 1<<40).Draw(t, "seq")

		lv := handlers.LabelValue(slot)
		noErrs(t, "label value", lv, validation.IsValidLabelValue(lv))
		if len(slot) <= 63 && lv != slot {
			t.Fatalf("a short slot name %q was changed to %q", slot, lv)
		}
		if slot != other && lv == handlers.LabelValue(other) {
			t.Fatalf("%q and %q share the label value %q", slot, other, lv)
		}

		claim := decide.ClaimName(slot, seq, now)
		noErrs(t, "claim name", claim, validation.IsValidLabelValue(claim))
		noErrs(t, "claim name", claim, validation.IsDNS1123Subdomain(claim))

		n := rapid.IntRange(1, 1<<20).Draw(t, "attempt")
		for _, job := range []string{decide.JobName(claim, "start", n), decide.JobName(claim, "stop", n), decide.SlotJobName(slot, seq)} {
			noErrs(t, "job name", job, validation.IsDNS1123Subdomain(job))
			noErrs(t, "job name as a label value", job, validation.IsValidLabelValue(job))
			if !strings.Contains(job, ".") {
				noErrs(t, "job name", job, validation.IsDNS1123Label(job))
			}
		}
	})
}

// The slot's full name travels in an annotation; the label is a lookup key.
func TestSlotOfJobPrefersTheAnnotation(t *testing.T) {
	long := strings.Repeat("rack-a.", 28) + "slot-1"
	labels := map[string]string{handlers.LabelSlot: handlers.LabelValue(long)}
	if got := handlers.SlotOfJob(labels, map[string]string{handlers.AnnotationSlot: long}); got != long {
		t.Fatalf("slot %q", got)
	}
	if got := handlers.SlotOfJob(map[string]string{handlers.LabelSlot: "a"}, nil); got != "a" {
		t.Fatalf("a Job without the annotation: slot %q", got)
	}
}
