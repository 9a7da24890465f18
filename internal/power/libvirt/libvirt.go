// Package libvirt is the libvirt power driver: a domain's create (on),
// shutdown or destroy (off) and state, over the libvirt RPC protocol to
// libvirtd (or virtqemud) on a unix socket or a TCP address.
package libvirt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/claimstream/claimstream/internal/power"
)

// DefaultURI is the hypervisor a daemon's system instance drives.
const DefaultURI = "qemu:///system"

// DefaultSocket is the system daemon's read-write socket.
const DefaultSocket = "/var/run/libvirt/libvirt-sock"

// Driver drives one domain. Each call opens its own connection and
// closes it.
type Driver struct {
	// Address is the daemon's unix socket path (it starts with "/"), or
	// its host:port when it listens on TCP (listen_tcp, auth_tcp "none":
	// the RPC carries no credentials of its own here).
	Address string
	// URI names the hypervisor driver inside the daemon; DefaultURI when
	// empty.
	URI string
	// Domain is the domain's name.
	Domain string
	// Force: Off destroys the domain (pulls its plug) rather than asking
	// its guest to shut down.
	Force bool
	// Timeout bounds one connection, from the dial to the last reply;
	// 10s when zero.
	Timeout time.Duration
}

// ID is the driver's name for the machine: the domain at its daemon.
func (d *Driver) ID() string {
	return "libvirt:" + d.Domain + "@" + d.address()
}

func (d *Driver) address() string {
	if d.Address == "" {
		return DefaultSocket
	}
	return d.Address
}

func (d *Driver) uri() string {
	if d.URI == "" {
		return DefaultURI
	}
	return d.URI
}

// On creates (starts) the domain.
func (d *Driver) On(ctx context.Context) error {
	return d.session(ctx, func(l *golibvirt.Libvirt, dom golibvirt.Domain) error {
		if err := l.DomainCreate(dom); err != nil {
			return fmt.Errorf("create: %w", err)
		}
		return nil
	})
}

// Off asks the guest to shut down, or destroys the domain when Force.
func (d *Driver) Off(ctx context.Context) error {
	return d.session(ctx, func(l *golibvirt.Libvirt, dom golibvirt.Domain) error {
		if d.Force {
			if err := l.DomainDestroy(dom); err != nil {
				return fmt.Errorf("destroy: %w", err)
			}
			return nil
		}
		if err := l.DomainShutdown(dom); err != nil {
			return fmt.Errorf("shutdown: %w", err)
		}
		return nil
	})
}

// Status is the domain's state: running, blocked, paused, being shut
// down or suspended to memory are on (the domain holds its resources);
// shut off and crashed are off.
func (d *Driver) Status(ctx context.Context) (power.Reading, error) {
	r := power.Reading{State: power.Unknown, ID: d.ID()}
	err := d.session(ctx, func(l *golibvirt.Libvirt, dom golibvirt.Domain) error {
		st, _, err := l.DomainGetState(dom, 0)
		if err != nil {
			return fmt.Errorf("state: %w", err)
		}
		r.State = State(golibvirt.DomainState(st))
		return nil
	})
	return r, err
}

// State maps a libvirt domain state to a power state.
func State(s golibvirt.DomainState) power.PowerState {
	switch s {
	case golibvirt.DomainRunning, golibvirt.DomainBlocked, golibvirt.DomainPaused, golibvirt.DomainShutdown, golibvirt.DomainPmsuspended:
		return power.On
	case golibvirt.DomainShutoff, golibvirt.DomainCrashed:
		return power.Off
	}
	return power.Unknown
}

// session connects, looks the domain up, runs fn and disconnects, and
// names a failure in operator words. The connection's deadline bounds
// every reply, and ctx's end closes it: the library's calls take no
// context.
func (d *Driver) session(ctx context.Context, fn func(*golibvirt.Libvirt, golibvirt.Domain) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	deadline := time.Now().Add(timeout)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	dl := &dialer{network: "tcp", address: d.address(), deadline: deadline}
	if strings.HasPrefix(dl.address, "/") {
		dl.network = "unix"
	}
	stop := context.AfterFunc(ctx, dl.close)
	defer stop()
	l := golibvirt.NewWithDialer(dl)
	if err := l.ConnectToURI(golibvirt.ConnectURI(d.uri())); err != nil {
		dl.close()
		return d.classify(ctx, err)
	}
	defer func() {
		l.Disconnect()
		dl.close()
	}()
	dom, err := l.DomainLookupByName(d.Domain)
	if err != nil {
		if golibvirt.IsNotFound(err) {
			return fmt.Errorf("no domain %q at %s (%s); check --domain and --uri", d.Domain, d.address(), d.uri())
		}
		return d.classify(ctx, err)
	}
	if err := fn(l, dom); err != nil {
		return d.classify(ctx, err)
	}
	return nil
}

// dialer dials once with a deadline on the whole connection, and can
// close it from another goroutine.
type dialer struct {
	network, address string
	deadline         time.Time

	mu   sync.Mutex
	conn net.Conn
	done bool
}

func (dl *dialer) Dial() (net.Conn, error) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.done {
		return nil, context.Canceled
	}
	c, err := (&net.Dialer{Deadline: dl.deadline}).Dial(dl.network, dl.address)
	if err != nil {
		return nil, err
	}
	c.SetDeadline(dl.deadline)
	dl.conn = c
	return c, nil
}

func (dl *dialer) close() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.done = true
	if dl.conn != nil {
		dl.conn.Close()
	}
}

func (d *Driver) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	at := d.address()
	var le golibvirt.Error
	if errors.As(err, &le) {
		code := golibvirt.ErrorNumber(le.Code)
		// A socket that wants SASL or polkit answers the unauthenticated
		// calls with an RPC error saying so.
		authRequired := code == golibvirt.ErrRPC && strings.Contains(le.Message, "authentication")
		switch {
		case authRequired || code == golibvirt.ErrAuthFailed || code == golibvirt.ErrAuthCancelled || code == golibvirt.ErrAuthUnavailable || code == golibvirt.ErrAccessDenied || code == golibvirt.ErrOperationDenied:
			return fmt.Errorf("%w: the libvirt daemon at %s refused this client (%s); this driver connects without SASL, so the socket or TCP listener needs auth \"none\" with access limited by who can reach it", power.ErrCredentials, at, le.Message)
		case code == golibvirt.ErrNoConnect:
			return fmt.Errorf("the libvirt daemon at %s cannot open %s: %s", at, d.uri(), le.Message)
		}
		return fmt.Errorf("domain %s: %w", d.ID(), err)
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: no permission on the libvirt socket %s; the Job's user needs read-write access to it (%v)", power.ErrCredentials, at, err)
	}
	var ne net.Error
	var dnsErr *net.DNSError
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &dnsErr) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Errorf("%w: no libvirt daemon answered at %s; check the socket path or address and that libvirtd (or virtqemud) runs (%v)", power.ErrUnreachable, at, err)
	}
	return fmt.Errorf("domain %s: %w", d.ID(), err)
}
