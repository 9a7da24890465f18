package natsserver

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"k8s.io/utils/clock"
)

// systemAccount is nats-server's own system account, named so that the
// process can hold an identity in it: the server reports every refused
// login there.
const systemAccount = "$SYS"

// authErrorSubject is where a server publishes its refused logins
// (nats-server's advisory; %s is the server's id).
const authErrorSubject = "$SYS.SERVER.%s.CLIENT.AUTH.ERR"

// authFailureSummary is how often the failures of the last while are
// summed up in one line, once the first of a quiet spell was logged alone.
const authFailureSummary = time.Minute

// configureAuthWatch gives the process an in-process identity in the
// system account that may only hear the server's refused logins.
func configureAuthWatch(opts *server.Options, watcher *processIdentity) {
	sys := server.NewAccount(systemAccount)
	opts.Accounts = append(opts.Accounts, sys)
	opts.SystemAccount = systemAccount
	opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{
		Nkey:                   watcher.pub,
		Account:                sys,
		AllowedConnectionTypes: map[string]struct{}{jwt.ConnectionTypeInProcess: {}},
		Permissions: &server.Permissions{
			Publish:   &server.SubjectPermission{Deny: []string{">"}},
			Subscribe: &server.SubjectPermission{Allow: []string{fmt.Sprintf(authErrorSubject, "*")}},
		},
	})
}

// AuthFailures counts the client port's refused logins, and logs them: the
// first of a quiet spell at once, with its address and user, then one
// summary line per authFailureSummary while they go on.
type AuthFailures struct {
	total atomic.Uint64
	log   *slog.Logger
	clock clock.PassiveClock

	mu        sync.Mutex
	spell     time.Time // when the current summary window began (zero: quiet)
	last      time.Time // the newest failure
	inWindow  uint64
	addresses map[string]bool
}

// Total is the count of refused logins since start.
func (f *AuthFailures) Total() uint64 {
	if f == nil {
		return 0
	}
	return f.total.Load()
}

// observe takes one refused login. A failure more than
// authFailureSummary after the one before starts a new spell, logged on
// its own line; within a spell, the failures of each authFailureSummary
// are summed up in one line when the window has passed.
func (f *AuthFailures) observe(host, user, reason string) {
	f.total.Add(1)
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.spell.IsZero() && now.Sub(f.last) >= authFailureSummary {
		f.summaryLocked(now)
		f.spell = time.Time{}
	}
	f.last = now
	if f.spell.IsZero() {
		f.spell, f.inWindow, f.addresses = now, 0, map[string]bool{}
		f.log.Warn("NATS login refused on the client port", "address", host, "user", user, "reason", reason)
		return
	}
	if now.Sub(f.spell) >= authFailureSummary {
		f.summaryLocked(now)
		f.spell, f.inWindow, f.addresses = now, 0, map[string]bool{}
	}
	f.inWindow++
	f.addresses[host] = true
}

// summaryLocked logs the failures counted since the window began, if any.
func (f *AuthFailures) summaryLocked(now time.Time) {
	if f.inWindow == 0 {
		return
	}
	f.log.Warn("NATS logins refused on the client port", "refused", f.inWindow, "addresses", len(f.addresses),
		"over", now.Sub(f.spell).Round(time.Second), "total", f.total.Load())
}

// watchAuthFailures subscribes to the server's refused logins.
func watchAuthFailures(ns *server.Server, nc *nats.Conn, log *slog.Logger, clk clock.PassiveClock) (*AuthFailures, error) {
	f := &AuthFailures{log: log, clock: clk}
	_, err := nc.Subscribe(fmt.Sprintf(authErrorSubject, ns.ID()), func(m *nats.Msg) {
		var ev server.DisconnectEventMsg
		if json.Unmarshal(m.Data, &ev) != nil {
			f.observe("", "", "unreadable advisory")
			return
		}
		f.observe(ev.Client.Host, ev.Client.User, ev.Reason)
	})
	if err != nil {
		return nil, fmt.Errorf("watch refused NATS logins: %w", err)
	}
	// The subscription is sent asynchronously: until the server has it,
	// a refused login is not heard. The start returns once it has.
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("watch refused NATS logins: %w", err)
	}
	return f, nil
}
