package power

import (
	"slices"
	"strings"
	"testing"
)

func TestFingerprint(t *testing.T) {
	want := make([]byte, 32)
	for i := range want {
		want[i] = byte(i * 7)
	}
	for _, in := range []string{
		FormatFingerprint(want),
		"sha256 Fingerprint=" + FormatFingerprint(want),
		strings.ToLower(strings.ReplaceAll(FormatFingerprint(want), ":", "")),
	} {
		got, err := ParseFingerprint(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("ParseFingerprint(%q) = %x, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "AB:CD", strings.Repeat("zz", 32)} {
		if _, err := ParseFingerprint(in); err == nil {
			t.Errorf("ParseFingerprint(%q): no error", in)
		}
	}
}
