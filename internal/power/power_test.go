package power

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// machine is a Driver over a state in memory: a request lands after
// `after` status polls, or never when after < 0.
type machine struct {
	mu        sync.Mutex
	state     PowerState
	pending   PowerState
	after     int
	statusErr []error // returned by the next polls, in order
	calls     []string
}

func (m *machine) ask(s PowerState, what string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, what)
	m.pending = s
	if m.after == 0 {
		m.state = s
	}
	return nil
}

func (m *machine) On(context.Context) error  { return m.ask(On, "on") }
func (m *machine) Off(context.Context) error { return m.ask(Off, "off") }

func (m *machine) Status(context.Context) (Reading, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, "status")
	if len(m.statusErr) > 0 {
		err := m.statusErr[0]
		m.statusErr = m.statusErr[1:]
		return Reading{State: Unknown, ID: "test:m"}, err
	}
	if m.pending != "" && m.after > 0 {
		m.after--
		if m.after == 0 {
			m.state = m.pending
		}
	}
	return Reading{State: m.state, ID: "test:m"}, nil
}

// wait runs Wait on a fake clock, stepping it by the interval whenever
// Wait waits on it.
func wait(t *testing.T, m Driver, want PowerState, timeout time.Duration) (Outcome, error, time.Duration) {
	t.Helper()
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	start := fc.Now()
	type res struct {
		out Outcome
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := Wait(context.Background(), m, want, Options{Timeout: timeout, Interval: time.Second, Clock: fc})
		done <- res{out, err}
	}()
	for {
		select {
		case r := <-done:
			return r.out, r.err, fc.Since(start)
		default:
		}
		if fc.HasWaiters() {
			fc.Step(time.Second)
		}
		runtime.Gosched()
	}
}

func TestWaitAlreadyThereSendsNothing(t *testing.T) {
	m := &machine{state: On}
	out, err, _ := wait(t, m, On, time.Minute)
	if err != nil || !out.Already || out.Reading.State != On {
		t.Fatalf("%+v, %v; want success, already on", out, err)
	}
	if got := strings.Join(m.calls, ","); got != "status" {
		t.Fatalf("calls %s; want one status and no request", got)
	}
}

func TestWaitPollsUntilTheState(t *testing.T) {
	m := &machine{state: Off, after: 3}
	out, err, took := wait(t, m, On, time.Minute)
	if err != nil || out.Already || out.Reading.State != On {
		t.Fatalf("%+v, %v; want on, not already", out, err)
	}
	if got := strings.Join(m.calls, ","); got != "status,on,status,status,status" {
		t.Fatalf("calls %s", got)
	}
	if took != 3*time.Second || out.Took != 3*time.Second {
		t.Fatalf("took %s (outcome %s); want three intervals", took, out.Took)
	}
}

func TestWaitTimesOutNamingTheState(t *testing.T) {
	m := &machine{state: On, after: -1}
	out, err, took := wait(t, m, Off, 10*time.Second)
	if !errors.Is(err, ErrNotReached) || Reason(err) != "StateNotReached" {
		t.Fatalf("%v; want never reached the state", err)
	}
	if want := "never reached the state: test:m was still on 10s after asking for off"; err.Error() != want {
		t.Fatalf("error %q; want %q", err, want)
	}
	if took != 10*time.Second || out.Reading.State != On {
		t.Fatalf("took %s, last %+v; want the whole timeout, last seen on", took, out.Reading)
	}
}

func TestWaitRetriesAFailedPollAndNamesIt(t *testing.T) {
	// The first status succeeds (a controller unreachable from the start
	// fails at once); every poll after the request fails.
	f := &flaky{machine: &machine{state: Off, after: -1}, failFrom: 2, err: fmt.Errorf("%w: BMC dropped a packet", ErrUnreachable)}
	_, err, took := wait(t, f, On, 3*time.Second)
	if !errors.Is(err, ErrNotReached) || !strings.Contains(err.Error(), "(last status error: unreachable: BMC dropped a packet)") {
		t.Fatalf("%v; want never reached, naming the last status error", err)
	}
	if took != 3*time.Second || f.n != 4 {
		t.Fatalf("took %s with %d status calls; want the whole timeout, polled each interval", took, f.n)
	}
}

// flaky fails every status from the failFrom-th on.
type flaky struct {
	*machine
	n        int
	failFrom int
	err      error
}

func (f *flaky) Status(ctx context.Context) (Reading, error) {
	f.n++
	if f.n >= f.failFrom {
		return Reading{State: Unknown, ID: "test:m"}, f.err
	}
	return f.machine.Status(ctx)
}

func TestWaitStopsAtWrongCredentials(t *testing.T) {
	m := &machine{state: Off, after: -1}
	f := &flaky{machine: m, failFrom: 2, err: fmt.Errorf("%w: user x", ErrCredentials)}
	_, err, took := wait(t, f, On, time.Hour)
	if !errors.Is(err, ErrCredentials) || took != time.Second {
		t.Fatalf("%v after %s; want wrong credentials after one interval", err, took)
	}
}

func TestWaitFirstStatusErrorFailsAtOnce(t *testing.T) {
	m := &machine{state: Off, statusErr: []error{fmt.Errorf("%w: no BMC", ErrUnreachable)}}
	_, err, took := wait(t, m, On, time.Hour)
	if !errors.Is(err, ErrUnreachable) || took != 0 {
		t.Fatalf("%v after %s; want unreachable at once", err, took)
	}
	if got := strings.Join(m.calls, ","); got != "status" {
		t.Fatalf("calls %s; want no request sent", got)
	}
}

func TestReason(t *testing.T) {
	for err, want := range map[error]string{
		nil:                                 "",
		fmt.Errorf("x: %w", ErrCredentials): "WrongCredentials",
		fmt.Errorf("x: %w", ErrUnreachable): "Unreachable",
		fmt.Errorf("x: %w", ErrNotReached):  "StateNotReached",
		fmt.Errorf("x: %w", ErrUnsupported): "Unsupported",
		errors.New("other"):                 "Failed",
	} {
		if got := Reason(err); got != want {
			t.Errorf("Reason(%v) = %q; want %q", err, got, want)
		}
	}
}
