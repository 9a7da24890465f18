package sim

import (
	"testing"
	"time"
)

// TestScaledClockResumesFromTheLog: a restarted simulation whose log ran
// ahead of the wall clock continues from the log's time, never behind it;
// a log behind the wall clock changes nothing.
func TestScaledClockResumesFromTheLog(t *testing.T) {
	ahead := time.Now().Add(3 * time.Hour)
	c := NewScaledClock(20)
	c.ResumeFrom(ahead)
	if now := c.Now(); now.Before(ahead) {
		t.Fatalf("after ResumeFrom(%s) the clock reads %s, behind the log", ahead, now)
	}
	if now := c.Now(); now.Sub(ahead) > time.Minute {
		t.Fatalf("after ResumeFrom(%s) the clock reads %s, far past it", ahead, now)
	}
	c2 := NewScaledClock(20)
	before := c2.Now()
	c2.ResumeFrom(before.Add(-time.Hour))
	if c2.Now().Before(before) {
		t.Fatalf("a log behind the wall clock moved the clock back")
	}
}
