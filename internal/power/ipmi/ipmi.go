// Package ipmi is the IPMI v2.0 (RMCP+, "lanplus") power driver: chassis
// power on, soft off (ACPI), hard off and status through the machine's
// BMC.
package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/claimstream/claimstream/internal/power"
)

// DefaultPort is the RMCP port of a BMC.
const DefaultPort = 623

// Driver drives one BMC. Each call opens its own session and closes it,
// so that a BMC's few session slots are never held between polls.
type Driver struct {
	// Host and Port are the BMC's address.
	Host string
	Port int
	// Username and Password are the BMC user's; the user needs the
	// operator privilege for chassis control.
	Username string
	Password string
	// Hard: Off cuts the power (chassis power off) rather than asking the
	// operating system to shut down (chassis power soft).
	Hard bool
	// CipherSuite is the RMCP+ cipher suite ID (3 and 17 are common);
	// zero asks the BMC for the ones it has and takes the strongest.
	CipherSuite int
	// Timeout bounds one UDP exchange with the BMC (the library retries
	// it a few times).
	Timeout time.Duration
}

// ID is the driver's name for the machine: its BMC's address.
func (d *Driver) ID() string {
	return "ipmi:" + net.JoinHostPort(d.Host, strconv.Itoa(d.port()))
}

func (d *Driver) port() int {
	if d.Port == 0 {
		return DefaultPort
	}
	return d.Port
}

// On is chassis power on.
func (d *Driver) On(ctx context.Context) error {
	return d.control(ctx, chassis.ChassisControlPowerUp, "power on")
}

// Off is chassis power soft, or chassis power off when Hard.
func (d *Driver) Off(ctx context.Context) error {
	if d.Hard {
		return d.control(ctx, chassis.ChassisControlPowerDown, "power off")
	}
	return d.control(ctx, chassis.ChassisControlSoftShutdown, "soft shutdown")
}

// Status is the chassis status's system power bit.
func (d *Driver) Status(ctx context.Context) (power.Reading, error) {
	r := power.Reading{State: power.Unknown, ID: d.ID()}
	err := d.session(ctx, func(c *client.Client) error {
		st, err := c.GetChassisStatus(ctx)
		if err != nil {
			return fmt.Errorf("chassis status: %w", err)
		}
		r.State = power.Off
		if st.PowerIsOn {
			r.State = power.On
		}
		return nil
	})
	return r, err
}

func (d *Driver) control(ctx context.Context, c chassis.ChassisControl, what string) error {
	return d.session(ctx, func(cl *client.Client) error {
		if _, err := cl.ChassisControl(ctx, c); err != nil {
			return fmt.Errorf("chassis %s: %w", what, err)
		}
		return nil
	})
}

// session runs fn in a new RMCP+ session and names its failure in
// operator words.
func (d *Driver) session(ctx context.Context, fn func(*client.Client) error) error {
	c, err := client.NewClient(d.Host, d.port(), d.Username, d.Password)
	if err != nil {
		return fmt.Errorf("BMC %s: %w", d.ID(), err)
	}
	// Chassis control needs the operator privilege, and a BMC may refuse a
	// session asking for more than the user has (the library asks for
	// administrator unless told).
	c.WithMaxPrivilegeLevel(types.PrivilegeLevelOperator)
	if d.Timeout > 0 {
		c.WithTimeout(d.Timeout)
	}
	if d.CipherSuite > 0 {
		c.WithCipherSuiteID(types.CipherSuiteID(d.CipherSuite))
	}
	if err := c.Connect(ctx); err != nil {
		return d.classify(err)
	}
	defer c.Close(context.WithoutCancel(ctx))
	if err := fn(c); err != nil {
		return d.classify(err)
	}
	return nil
}

// classify wraps err with the power failure it is, quoting the one line
// of the library's error that says why.
func (d *Driver) classify(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	at := d.ID()
	if why := cause(err, credentialWords); why != "" {
		return fmt.Errorf("%w: the BMC at %s refused user %q with this password, or the user lacks the operator privilege (%s)", power.ErrCredentials, at, d.Username, why)
	}
	if isUnreachable(err) {
		return fmt.Errorf("%w: no BMC answered at %s; check the address, the port and that IPMI over LAN is enabled (%s)", power.ErrUnreachable, at, cause(err, nil))
	}
	return fmt.Errorf("BMC %s: %w", at, err)
}

func isUnreachable(err error) bool {
	var ne net.Error
	var dnsErr *net.DNSError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) ||
		errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout()) || errors.As(err, &dnsErr) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "i/o timeout")
}

// credentialWords are how the library reports a BMC's refusal in the
// RMCP+ handshake: a status code naming the user (RAKP 2), or an
// authentication code that does not match the password.
var credentialWords = []string{"unauthorized name", "authentication code mismatch", "invalid integrity check", "insufficient privilege", "invalid role"}

// cause is the innermost reason of the first line of err's text that
// holds one of words (any line when words is nil).
func cause(err error, words []string) string {
	for _, line := range strings.Split(err.Error(), "\n") {
		l := strings.ToLower(line)
		hit := words == nil && strings.TrimSpace(line) != ""
		for _, w := range words {
			hit = hit || strings.Contains(l, w)
		}
		if !hit {
			continue
		}
		if i := strings.LastIndex(line, "err: "); i >= 0 {
			line = line[i+len("err: "):]
		}
		return strings.TrimSpace(line)
	}
	return ""
}
