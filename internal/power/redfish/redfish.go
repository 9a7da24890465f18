// Package redfish is the Redfish power driver: a ComputerSystem's
// Reset action (On, GracefulShutdown, ForceOff) and its PowerState, over
// HTTPS with basic or session authentication, the BMC's certificate
// checked against a CA or pinned by its SHA-256 fingerprint.
package redfish

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/claimstream/claimstream/internal/power"
)

// The Reset types the driver asks for.
const (
	ResetOn               = "On"
	ResetGracefulShutdown = "GracefulShutdown"
	ResetForceOff         = "ForceOff"
)

// serviceRoot is the Redfish service root's fixed path.
const serviceRoot = "/redfish/v1/"

// bodyLimit bounds what is read of one reply.
const bodyLimit = 1 << 20

// Driver drives one ComputerSystem. Each call opens its own session
// (when Session) and deletes it, so that a BMC's few session slots are
// never held between polls.
type Driver struct {
	// Endpoint is the BMC's base URL, https://host[:port].
	Endpoint string
	// System picks the ComputerSystem: its Id in the Systems collection,
	// or its path; empty takes the collection's only member.
	System string
	// Username and Password are the BMC user's; Reset needs the
	// ConfigureComponents privilege (the Operator role has it).
	Username string
	Password string
	// Session: authenticate once per call with a Redfish session
	// (X-Auth-Token) rather than with basic authentication on every
	// request.
	Session bool
	// Force: Off is ForceOff rather than GracefulShutdown.
	Force bool
	// RootCAs verify the BMC's certificate; the system's roots when nil.
	RootCAs *x509.CertPool
	// Fingerprint, when set, is the SHA-256 of the BMC's certificate
	// (DER): that certificate is trusted and no chain is verified, for a
	// BMC with a self-signed certificate.
	Fingerprint []byte
	// Timeout bounds one HTTP request; 10s when zero.
	Timeout time.Duration
}

// ID is the driver's name for the machine: the system at its BMC.
func (d *Driver) ID() string {
	id := "redfish:" + d.host()
	if d.System != "" {
		id += "/" + strings.TrimPrefix(d.System, "/")
	}
	return id
}

func (d *Driver) host() string {
	u, err := url.Parse(d.Endpoint)
	if err != nil || u.Host == "" {
		return d.Endpoint
	}
	return u.Host
}

// On resets the system with ResetType On.
func (d *Driver) On(ctx context.Context) error {
	return d.reset(ctx, ResetOn)
}

// Off resets the system with GracefulShutdown, or ForceOff when Force.
func (d *Driver) Off(ctx context.Context) error {
	if d.Force {
		return d.reset(ctx, ResetForceOff)
	}
	return d.reset(ctx, ResetGracefulShutdown)
}

// Status is the system's PowerState.
func (d *Driver) Status(ctx context.Context) (power.Reading, error) {
	r := power.Reading{State: power.Unknown, ID: d.ID()}
	err := d.session(ctx, func(c *conn) error {
		sys, err := c.system(ctx)
		if err != nil {
			return err
		}
		r.State = State(sys.PowerState)
		return nil
	})
	return r, err
}

// State maps a Redfish PowerState to a power state: PoweringOn and
// PoweringOff are on the way and neither.
func State(s string) power.PowerState {
	switch s {
	case "On", "Paused":
		return power.On
	case "Off":
		return power.Off
	}
	return power.Unknown
}

func (d *Driver) reset(ctx context.Context, resetType string) error {
	return d.session(ctx, func(c *conn) error {
		sys, err := c.system(ctx)
		if err != nil {
			return err
		}
		if sys.Reset.Target == "" {
			return fmt.Errorf("%w: the system %s has no #ComputerSystem.Reset action", power.ErrUnsupported, sys.path)
		}
		if len(sys.Reset.Allowed) > 0 && !slices.Contains(sys.Reset.Allowed, resetType) {
			return fmt.Errorf("%w: the system %s does not allow ResetType %s (it allows %s)", power.ErrUnsupported, sys.path, resetType, strings.Join(sys.Reset.Allowed, ", "))
		}
		body, _ := json.Marshal(map[string]string{"ResetType": resetType})
		if _, err := c.do(ctx, http.MethodPost, sys.Reset.Target, body); err != nil {
			return fmt.Errorf("reset %s: %w", resetType, err)
		}
		return nil
	})
}

// conn is one call's authenticated client.
type conn struct {
	d      *Driver
	client *http.Client
	base   *url.URL
	token  string
}

// session runs fn with an authenticated client, opening a Redfish
// session first when d.Session and deleting it after.
func (d *Driver) session(ctx context.Context, fn func(*conn) error) error {
	c, err := d.conn()
	if err != nil {
		return err
	}
	defer c.client.CloseIdleConnections()
	if d.Session {
		loc, err := c.login(ctx)
		if err != nil {
			return err
		}
		defer func() {
			// A session left behind expires on its own; deleting it frees
			// the slot now.
			c.do(context.WithoutCancel(ctx), http.MethodDelete, loc, nil)
		}()
	}
	return fn(c)
}

func (d *Driver) conn() (*conn, error) {
	base, err := url.Parse(d.Endpoint)
	if err != nil || base.Host == "" {
		return nil, fmt.Errorf("Redfish endpoint %q: want https://host[:port]", d.Endpoint)
	}
	if base.Scheme != "https" {
		return nil, fmt.Errorf("Redfish endpoint %q: want https (the credentials would cross the network in clear)", d.Endpoint)
	}
	tc := power.TLSConfig(d.RootCAs, d.Fingerprint)
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	tr := &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: timeout}
	client := &http.Client{
		Transport: tr,
		Timeout:   timeout,
		// A redirect to another host would carry the session token
		// there.
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != base.Host || len(via) > 5 {
				return fmt.Errorf("redirect to %s refused", req.URL.Host)
			}
			return nil
		},
	}
	return &conn{d: d, client: client, base: base}, nil
}

// login opens a session and returns its path.
func (c *conn) login(ctx context.Context) (string, error) {
	sessions := "/redfish/v1/SessionService/Sessions"
	if b, err := c.do(ctx, http.MethodGet, serviceRoot, nil); err == nil {
		if root, err := decodeRoot(b); err == nil && root.Sessions != "" {
			sessions = root.Sessions
		}
	} else if !errors.Is(err, errStatus) && !errors.Is(err, power.ErrCredentials) {
		// A service root that wants credentials (against DSP0266) leaves
		// the standard path; a transport failure ends here.
		return "", err
	}
	body, _ := json.Marshal(map[string]string{"UserName": c.d.Username, "Password": c.d.Password})
	req, err := c.request(ctx, http.MethodPost, sessions, body)
	if err != nil {
		return "", err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return "", c.d.transportError(ctx, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	if resp.StatusCode/100 != 2 {
		return "", c.d.statusError(resp.StatusCode, http.MethodPost, sessions, b)
	}
	c.token = resp.Header.Get("X-Auth-Token")
	if c.token == "" {
		return "", fmt.Errorf("Redfish service at %s opened a session without an X-Auth-Token", c.d.host())
	}
	loc := resp.Header.Get("Location")
	if u, err := url.Parse(loc); err == nil && (u.Host == "" || u.Host == c.base.Host) {
		return u.Path, nil
	}
	return "", nil
}

type system struct {
	path       string
	PowerState string
	Reset      resetAction
}

type resetAction struct {
	Target  string
	Allowed []string
}

// system finds and reads the ComputerSystem.
func (c *conn) system(ctx context.Context) (*system, error) {
	path, err := c.systemPath(ctx)
	if err != nil {
		return nil, err
	}
	b, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	sys, err := decodeSystem(b)
	if err != nil {
		return nil, fmt.Errorf("Redfish system %s: %w", path, err)
	}
	sys.path = path
	return sys, nil
}

func (c *conn) systemPath(ctx context.Context) (string, error) {
	if strings.HasPrefix(c.d.System, "/") {
		return c.d.System, nil
	}
	systems := "/redfish/v1/Systems"
	b, err := c.do(ctx, http.MethodGet, serviceRoot, nil)
	if err != nil {
		return "", err
	}
	if root, err := decodeRoot(b); err == nil && root.Systems != "" {
		systems = root.Systems
	}
	if c.d.System != "" {
		return strings.TrimSuffix(systems, "/") + "/" + url.PathEscape(c.d.System), nil
	}
	b, err = c.do(ctx, http.MethodGet, systems, nil)
	if err != nil {
		return "", err
	}
	members, err := decodeCollection(b)
	if err != nil {
		return "", fmt.Errorf("Redfish systems %s: %w", systems, err)
	}
	if len(members) != 1 {
		return "", fmt.Errorf("the Redfish service at %s has %d systems (%s); name one with --system", c.d.host(), len(members), strings.Join(members, ", "))
	}
	return members[0], nil
}

var errStatus = errors.New("HTTP status")

func (c *conn) request(ctx context.Context, method, path string, body []byte) (*http.Request, error) {
	u := *c.base
	u.Path, u.RawPath, u.RawQuery = path, "", ""
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	switch {
	case c.token != "":
		req.Header.Set("X-Auth-Token", c.token)
	case !c.d.Session:
		req.SetBasicAuth(c.d.Username, c.d.Password)
	}
	return req, nil
}

// do sends one request and returns the reply's body when its status is
// 2xx.
func (c *conn) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, c.d.transportError(ctx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	if err != nil {
		return nil, c.d.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.d.statusError(resp.StatusCode, method, path, b)
	}
	return b, nil
}

func (d *Driver) statusError(code int, method, path string, body []byte) error {
	msg := errorMessage(body)
	if msg != "" {
		msg = ": " + msg
	}
	switch code {
	case http.StatusUnauthorized:
		return fmt.Errorf("%w: the Redfish service at %s refused user %q with this password (HTTP 401 on %s %s%s)", power.ErrCredentials, d.host(), d.Username, method, path, msg)
	case http.StatusForbidden:
		return fmt.Errorf("%w: the Redfish service at %s does not let user %q do this; Reset needs the ConfigureComponents privilege, as the Operator role has (HTTP 403 on %s %s%s)", power.ErrCredentials, d.host(), d.Username, method, path, msg)
	}
	return fmt.Errorf("%w %d from the Redfish service at %s on %s %s%s", errStatus, code, d.host(), method, path, msg)
}

func (d *Driver) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var fp *power.FingerprintError
	if errors.As(err, &fp) {
		return fmt.Errorf("the certificate of the Redfish service at %s is not the pinned one: %v", d.host(), fp)
	}
	if power.Untrusted(err) {
		return fmt.Errorf("the certificate of the Redfish service at %s is not trusted: give the CA that signed it (--ca-file) or pin its SHA-256 fingerprint (--fingerprint) (%v)", d.host(), err)
	}
	if power.Unanswered(err) {
		return fmt.Errorf("%w: no Redfish service answered at %s; check the address, the port and that the BMC's HTTPS service is enabled (%v)", power.ErrUnreachable, d.host(), err)
	}
	return fmt.Errorf("Redfish service at %s: %w", d.host(), err)
}
