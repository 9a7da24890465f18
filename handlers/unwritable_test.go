package handlers_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
)

// While the log is known unwritable, a command that would write is
// refused Unavailable at once, even while another command of its group
// holds the group's lock (an append in flight settling its outcome); a
// command that would write nothing goes on as before.
func TestUnwritableLogRefusesWithoutWaitingForTheLock(t *testing.T) {
	health := eventlog.NewLogHealth(time.Now())
	h := handlerstest.OnServer(t, eventstest.StartServer(t), eventlog.StoreConfig{Stream: "UNWRITABLE", Health: health})
	h.Declare("g", events.GroupSpec{}, "a", "b")

	// The first command holds the group's lock in its gate until released;
	// the gate's later calls pass at once.
	held, release := make(chan struct{}, 1), make(chan struct{})
	var gated atomic.Bool
	h.Service.Gate = func() (uint64, error) {
		if gated.CompareAndSwap(false, true) {
			held <- struct{}{}
			<-release
		}
		return 0, nil
	}
	first := make(chan error, 1)
	go func() {
		_, err := h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "first"})
		first <- err
	}()
	<-held
	health.Set(false, "no space left on device", false, time.Now())

	done := make(chan error, 1)
	go func() {
		_, err := h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 1, RequestedBy: "second"})
		done <- err
	}()
	var err error
	eventstest.CheckFor(t, 5*time.Second, 10*time.Millisecond, func() error {
		select {
		case err = <-done:
			return nil
		default:
			return errors.New("the second command waits for the group's lock")
		}
	})
	var de *decide.Error
	if !errors.As(err, &de) || de.Code != decide.CodeUnavailable || !strings.Contains(de.Msg, "event log cannot be written: no space left on device") {
		t.Fatalf("second command: %v, want Unavailable saying the log cannot be written", err)
	}
	close(release)
	if err := <-first; err == nil {
		t.Fatal("the first command's append succeeded on an unwritable log")
	}

	// Nothing to write: not refused.
	if _, err := h.Service.Execute(context.Background(), decide.IncreaseSize{Group: "g", Delta: 0, RequestedBy: "noop"}); err != nil && errors.Is(err, eventlog.ErrLogUnwritable) {
		t.Fatalf("a command that writes nothing: %v", err)
	}
}
