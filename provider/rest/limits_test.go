package rest_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/provider/rest"
	"github.com/claimstream/claimstream/provider/rest/resttest"
)

// serveWithLimits serves the fixture's API on a loopback listener with
// short limits; it returns the address.
func serveWithLimits(t *testing.T, f *resttest.Fixture, lim rest.ServerLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rest.Serve(ctx, ln, f.Server.Config.Handler, lim) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// TestSlowClientsAreCutAndOthersServed: slow-loris connections trickling
// headers, or bodies (with and without the token), are all closed within
// the timeouts, or sooner by newer connections past the cap; meanwhile a follower of the event stream keeps its stream
// and a new legitimate request is answered, though the attackers
// outnumber the cap on unauthenticated connections.
func TestSlowClientsAreCutAndOthersServed(t *testing.T) {
	f := resttest.Start(t)
	const timeout = 300 * time.Millisecond
	addr := serveWithLimits(t, f, rest.ServerLimits{ReadHeaderTimeout: timeout, BodyTimeout: timeout, WriteTimeout: timeout, IdleTimeout: time.Second, MaxUnauthenticated: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A follower, authenticated, before the attack.
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+resttest.Token)
	sse, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer sse.Body.Close()
	if sse.StatusCode != http.StatusOK {
		t.Fatalf("event stream: %d", sse.StatusCode)
	}

	token := "Authorization: Bearer " + resttest.Token + "\r\n"
	openings := []string{
		"GET /healthz HTTP/1.1\r\nHost: x\r\n",                                           // headers, never ended
		"GET /api/v1/groups HTTP/1.1\r\nHost: x\r\nX-Slow: ",                             // headers, never ended
		"POST /api/v1/slots/s/claim HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", // body, no token
		"POST /api/v1/whatif HTTP/1.1\r\nHost: x\r\n" + token + "Content-Length: 1000\r\n\r\n{",
	}
	const attackers = 12 // three of each, three times the cap
	type cut struct {
		i     int
		after time.Duration
		err   error
	}
	cuts := make(chan cut, attackers)
	var wg, opened sync.WaitGroup
	for i := range attackers {
		wg.Add(1)
		opened.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				opened.Done()
				cuts <- cut{i, 0, err}
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				buf := make([]byte, 512)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			}()
			_, err = c.Write([]byte(openings[i%len(openings)]))
			opened.Done()
			if err != nil {
				cuts <- cut{i, time.Since(began), nil}
				return
			}
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-closed:
					cuts <- cut{i, time.Since(began), nil}
					return
				case <-tick.C:
					_, _ = c.Write([]byte("a"))
				}
			}
		}()
	}

	// Meanwhile, a legitimate request, made once the attack is on, gets
	// its answer.
	legit := make(chan error, 1)
	go func() {
		opened.Wait()
		g, err := (&rest.Client{BaseURL: "http://" + addr, Token: resttest.Token}).Groups(ctx)
		if err == nil && g.Items == nil {
			err = fmt.Errorf("no groups list")
		}
		legit <- err
	}()

	wg.Wait()
	close(cuts)
	for c := range cuts {
		// The latest wait: a connection the cap held back waits for one
		// batch of the others to be cut, then its own timeout.
		if c.err != nil || c.after > attackers/4*(timeout+time.Second) {
			t.Errorf("attacker %d (%q): cut after %v (%v)", c.i, openings[c.i%len(openings)], c.after, c.err)
		}
	}
	if err := <-legit; err != nil {
		t.Fatalf("legitimate request during the attack: %v", err)
	}
	// The follower still follows: an event appended now reaches it.
	if _, err := f.H.Store.Append(ctx, events.SlotAggregate("after"), 0, events.Event{Time: f.H.Clock.Now(), Data: events.SlotDeclared{Ref: events.Ref{Slot: "after", Group: "g", Cause: "test"}}}); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(sse.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream cut by the attack or the timeouts: %v", err)
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, `"after"`) {
			break
		}
	}
}

// TestKeepAliveFloodLocksNoOneOut: 300 unauthenticated keep-alive
// connections from 30 addresses, each asking /healthz again and again,
// outnumber the cap on unauthenticated connections; an authenticated API
// request and a fresh /readyz are still answered at once, and the
// authenticated connection is kept alive while the others are closed
// after each answer.
func TestKeepAliveFloodLocksNoOneOut(t *testing.T) {
	f := resttest.Start(t)
	addr := serveWithLimits(t, f, rest.ServerLimits{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	attack, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()

	const attackers, addresses = 300, 30
	var mu sync.Mutex
	served := map[int]bool{}
	closes := 0
	for i := range attackers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%addresses))}}
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			for attack.Err() == nil {
				c, err := d.DialContext(attack, "tcp", addr)
				if err != nil {
					return
				}
				unhook := context.AfterFunc(attack, func() { c.Close() })
				br := bufio.NewReader(c)
				for {
					if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
						break
					}
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						break
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					served[i] = true
					if resp.Close {
						closes++
					}
					mu.Unlock()
					select {
					case <-attack.Done():
					case <-tick.C:
					}
					if resp.Close || attack.Err() != nil {
						break
					}
				}
				unhook()
				c.Close()
			}
		}()
	}
	// The attack is on once the cap's worth of attackers have been
	// answered.
	eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if n := len(served); n < rest.DefaultMaxUnauthenticated {
			return fmt.Errorf("%d of the cap's %d attackers answered", n, rest.DefaultMaxUnauthenticated)
		}
		return nil
	})

	const bound = 5 * time.Second
	legit, cancelLegit := context.WithTimeout(ctx, bound)
	defer cancelLegit()
	began := time.Now()
	// The CLI's request, with the token.
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cli := &rest.Client{BaseURL: "http://" + addr, Token: resttest.Token, HTTP: &http.Client{Transport: tr}}
	if _, err := cli.Groups(legit); err != nil {
		t.Fatalf("authenticated request during the flood: %v (after %v)", err, time.Since(began))
	}
	// A probe: a fresh connection, no token.
	req, _ := http.NewRequestWithContext(legit, "GET", "http://"+addr+"/readyz", nil)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatalf("/readyz during the flood: %v (after %v)", err, time.Since(began))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz during the flood: %d", resp.StatusCode)
	}
	// An authenticated connection is kept alive.
	c, err := net.DialTimeout("tcp", addr, bound)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(bound))
	if _, err := c.Write([]byte("GET /api/v1/groups HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + resttest.Token + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if resp, err = http.ReadResponse(bufio.NewReader(c), nil); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("authenticated request: %d, connection closed %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	mu.Lock()
	defer mu.Unlock()
	if closes == 0 {
		t.Error("no unauthenticated answer closed its connection")
	}
}
