package handlers

import (
	"testing"
	"time"
)

// An empty output is taken as final only once it read empty again
// silentAfter later, so a report written late is still read; another Job
// of the slot starts over.
func TestSilentJobsSettleOnlyAfterTwoEmptyReadsApart(t *testing.T) {
	s := newSilentJobs()
	t0 := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	steps := []struct {
		job  string
		at   time.Duration
		want bool // silent after this read
	}{
		{"j1", 0, false},
		{"j1", silentAfter - time.Second, false},
		{"j1", silentAfter, true},
		{"j2", silentAfter + time.Second, false},
		{"j2", 2*silentAfter + time.Second, true},
	}
	for i, st := range steps {
		s.readEmpty("a", st.job, t0.Add(st.at))
		if got := s.is("a", st.job); got != st.want {
			t.Fatalf("step %d (%s at %v): silent %t, want %t", i, st.job, st.at, got, st.want)
		}
	}
	if s.is("a", "j1") || s.is("b", "j2") {
		t.Fatal("a settled Job counts for another Job or slot")
	}
}
