// Package proxmox is the Proxmox VE power driver: a guest's (a QEMU VM's
// or an LXC container's) start, shutdown or stop and its status, or a
// node's wake-on-LAN through another member of its cluster, its shutdown
// and its online state, over the Proxmox VE API with an API token, the
// host's certificate checked against a CA or pinned by its SHA-256
// fingerprint.
package proxmox

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/claimstream/claimstream/internal/power"
)

// The guest kinds the API paths name.
const (
	QEMU = "qemu"
	LXC  = "lxc"
)

// apiBase prefixes every API path.
const apiBase = "/api2/json"

// bodyLimit bounds what is read of one reply.
const bodyLimit = 1 << 20

// Driver drives one guest, or one node when VMID is 0.
type Driver struct {
	// Endpoint is the API's base URL, https://host:8006. For a node it is
	// another member of the node's cluster: a node that is off has no API,
	// and the API wakes a node from the member that answers.
	Endpoint string
	// Node is the cluster node the guest runs on, or the node itself.
	Node string
	// VMID is the guest's ID; 0 targets the node.
	VMID int
	// Kind is the guest's kind, QEMU or LXC; QEMU when empty.
	Kind string
	// TokenID is the API token's ID, USER@REALM!TOKENID, and Secret its
	// secret. The token needs VM.PowerMgmt and VM.Audit on the guest, or
	// Sys.PowerMgmt and Sys.Audit on the node.
	TokenID string
	Secret  string
	// Hard: Off stops the guest (pulls its plug) rather than asking it to
	// shut down. A node has no hard off.
	Hard bool
	// RootCAs verify the host's certificate; the system's roots when nil.
	RootCAs *x509.CertPool
	// Fingerprint, when set, is the SHA-256 of the host's certificate
	// (DER): that certificate is trusted and no chain is verified.
	Fingerprint []byte
	// Timeout bounds one HTTP request; 10s when zero.
	Timeout time.Duration

	// lastTask is the last task a guest action started (its UPID), and
	// lastAction the action; Status follows it until it ends.
	lastTask, lastAction string
}

// nodeName is what Proxmox takes as a node's name (a host name's label
// characters).
var nodeName = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?$`)

// Validate checks the target and the token before anything is sent.
func (d *Driver) Validate() error {
	u, err := url.Parse(d.Endpoint)
	if err != nil || u.Host == "" {
		return fmt.Errorf("Proxmox API address %q: want https://host:8006", d.Endpoint)
	}
	if u.Scheme != "https" {
		return fmt.Errorf("Proxmox API address %q: want https (the token would cross the network in clear)", d.Endpoint)
	}
	if !nodeName.MatchString(d.Node) {
		return fmt.Errorf("Proxmox node %q: want the node's name as the cluster knows it", d.Node)
	}
	if d.VMID != 0 && (d.VMID < 100 || d.VMID > 999999999) {
		return fmt.Errorf("Proxmox guest ID %d: want 100 to 999999999", d.VMID)
	}
	if k := d.kind(); k != QEMU && k != LXC {
		return fmt.Errorf("Proxmox guest kind %q: want %s or %s", d.Kind, QEMU, LXC)
	}
	user, tokenName, ok := strings.Cut(d.TokenID, "!")
	if !ok || !strings.Contains(user, "@") || tokenName == "" || strings.ContainsAny(d.TokenID, "= \t\r\n") {
		return fmt.Errorf("Proxmox API token ID %q: want USER@REALM!TOKENID", d.TokenID)
	}
	if d.Secret == "" || strings.ContainsAny(d.Secret, " \t\r\n") {
		return errors.New("Proxmox API token secret: empty or holds white space")
	}
	return nil
}

func (d *Driver) kind() string {
	if d.Kind == "" {
		return QEMU
	}
	return d.Kind
}

// ID is the driver's name for the machine: proxmox:NODE/KIND/VMID for a
// guest, proxmox:node/NODE for a node.
func (d *Driver) ID() string {
	if d.VMID == 0 {
		return "proxmox:node/" + d.Node
	}
	return "proxmox:" + d.Node + "/" + d.kind() + "/" + strconv.Itoa(d.VMID)
}

func (d *Driver) host() string {
	u, err := url.Parse(d.Endpoint)
	if err != nil || u.Host == "" {
		return d.Endpoint
	}
	return u.Host
}

func (d *Driver) guestPath(tail string) string {
	return "/nodes/" + url.PathEscape(d.Node) + "/" + d.kind() + "/" + strconv.Itoa(d.VMID) + tail
}

// On starts the guest, or wakes the node with the wake-on-LAN packet
// the answering member sends (to the MAC address the node's
// configuration holds).
func (d *Driver) On(ctx context.Context) error {
	if d.VMID == 0 {
		_, err := d.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(d.Node)+"/wakeonlan", nil)
		return err
	}
	return d.task(ctx, "start")
}

// Off shuts the guest down (ACPI, or the guest agent), or stops it when
// Hard; a node is shut down.
func (d *Driver) Off(ctx context.Context) error {
	if d.VMID == 0 {
		if d.Hard {
			return fmt.Errorf("%w: the Proxmox API has no hard power-off for a node, only its shutdown; drop --hard", power.ErrUnsupported)
		}
		_, err := d.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(d.Node)+"/status", url.Values{"command": {"shutdown"}})
		return err
	}
	if d.Hard {
		return d.task(ctx, "stop")
	}
	// No forceStop: a guest that ignores the shutdown stays on and the
	// wait says so, rather than Proxmox stopping it unasked.
	return d.task(ctx, "shutdown")
}

// task posts a guest's status action; the API answers with the task it
// started, which Status then follows (taskFailed).
func (d *Driver) task(ctx context.Context, action string) error {
	path := d.guestPath("/status/" + action)
	b, err := d.do(ctx, http.MethodPost, path, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", action, err)
	}
	upid, err := decodeUPID(b)
	if err != nil {
		return fmt.Errorf("the Proxmox API at %s on POST %s: %w", d.host(), path, err)
	}
	d.lastTask, d.lastAction = upid, action
	return nil
}

// taskFailed follows the task the last action started: once it has ended
// with anything but OK (a locked guest, a missing disk), the state it was
// to bring will not come, and the error says why in Proxmox's words.
func (d *Driver) taskFailed(ctx context.Context) error {
	if d.lastTask == "" {
		return nil
	}
	// do escapes the path: a UPID holds ':' and '!', never '/'.
	path := "/nodes/" + d.Node + "/tasks/" + d.lastTask + "/status"
	b, err := d.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	st, err := decodeTaskStatus(b)
	if err != nil {
		return fmt.Errorf("the Proxmox API at %s on GET %s: %w", d.host(), path, err)
	}
	if st.Status == "running" {
		return nil
	}
	upid, action := d.lastTask, d.lastAction
	d.lastTask, d.lastAction = "", ""
	if st.ExitStatus == "OK" {
		return nil
	}
	return fmt.Errorf("%w: the Proxmox task to %s %s (%s) ended with %q", power.ErrNotReached, action, d.ID(), upid, st.ExitStatus)
}

// Status is the guest's status (running is on, stopped off), or the
// node's online state in its cluster.
func (d *Driver) Status(ctx context.Context) (power.Reading, error) {
	r := power.Reading{State: power.Unknown, ID: d.ID()}
	if d.VMID == 0 {
		b, err := d.do(ctx, http.MethodGet, "/cluster/status", nil)
		if err != nil {
			return r, err
		}
		members, err := decodeClusterStatus(b)
		if err != nil {
			return r, fmt.Errorf("the Proxmox API at %s on GET /cluster/status: %w", d.host(), err)
		}
		names := make([]string, 0, len(members))
		for _, m := range members {
			if m.Name == d.Node {
				r.State = power.Off
				if m.Online {
					r.State = power.On
				}
				return r, nil
			}
			names = append(names, m.Name)
		}
		return r, fmt.Errorf("no node %q in the cluster of the Proxmox API at %s (its nodes: %s); check --node", d.Node, d.host(), strings.Join(names, ", "))
	}
	if err := d.taskFailed(ctx); err != nil {
		return r, err
	}
	path := d.guestPath("/status/current")
	b, err := d.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return r, err
	}
	s, err := decodeGuestStatus(b)
	if err != nil {
		return r, fmt.Errorf("the Proxmox API at %s on GET %s: %w", d.host(), path, err)
	}
	r.State = State(s)
	return r, nil
}

// State maps a guest's status to a power state.
func State(s string) power.PowerState {
	switch s {
	case "running":
		return power.On
	case "stopped":
		return power.Off
	}
	return power.Unknown
}

// do sends one request, form-encoded when form is not nil, and returns
// the reply's body when its status is 2xx.
func (d *Driver) do(ctx context.Context, method, path string, form url.Values) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	base, _ := url.Parse(d.Endpoint)
	u := *base
	u.Path = strings.TrimSuffix(u.Path, "/") + apiBase + path
	u.RawPath, u.RawQuery = "", ""
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", "PVEAPIToken="+d.TokenID+"="+d.Secret)
	client := d.client()
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return nil, d.transportError(ctx, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	if err != nil {
		return nil, d.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, d.statusError(resp, method, path, b)
	}
	return b, nil
}

func (d *Driver) client() *http.Client {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: power.TLSConfig(d.RootCAs, d.Fingerprint), Proxy: http.ProxyFromEnvironment, TLSHandshakeTimeout: timeout},
		Timeout:   timeout,
		// The API does not redirect; one that does is not followed with
		// the token.
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return fmt.Errorf("redirect to %s refused", req.URL.Redacted())
		},
	}
}

func (d *Driver) statusError(resp *http.Response, method, path string, body []byte) error {
	code := resp.StatusCode
	msg := errorMessage(body)
	if msg == "" {
		// The API puts a refusal's reason in the status line.
		if reason := strings.TrimSpace(strings.TrimPrefix(resp.Status, strconv.Itoa(code))); reason != "" && reason != http.StatusText(code) {
			msg = clip(reason)
		}
	}
	if msg != "" {
		msg = ": " + msg
	}
	switch code {
	case http.StatusUnauthorized:
		return fmt.Errorf("%w: the Proxmox API at %s refused the API token %q (HTTP 401 on %s %s%s); check the token ID, its secret and its expiry", power.ErrCredentials, d.host(), d.TokenID, method, path, msg)
	case http.StatusForbidden:
		return fmt.Errorf("%w: the Proxmox API at %s does not let the API token %q do this; it needs %s (a privilege-separated token needs its own permission) (HTTP 403 on %s %s%s)", power.ErrCredentials, d.host(), d.TokenID, d.privileges(), method, path, msg)
	}
	return fmt.Errorf("HTTP %d from the Proxmox API at %s on %s %s%s", code, d.host(), method, path, msg)
}

// privileges are those the token needs on the target.
func (d *Driver) privileges() string {
	if d.VMID == 0 {
		return "Sys.PowerMgmt and Sys.Audit on /nodes/" + d.Node
	}
	return "VM.PowerMgmt and VM.Audit on /vms/" + strconv.Itoa(d.VMID)
}

func (d *Driver) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var fp *power.FingerprintError
	if errors.As(err, &fp) {
		return fmt.Errorf("the certificate of the Proxmox API at %s is not the pinned one: %v", d.host(), fp)
	}
	if power.Untrusted(err) {
		return fmt.Errorf("the certificate of the Proxmox API at %s is not trusted: give the CA that signed it (--ca-file) or pin its SHA-256 fingerprint (--fingerprint) (%v)", d.host(), err)
	}
	if power.Unanswered(err) {
		hint := ""
		if d.VMID == 0 {
			hint = "; for a node, the address is another member of its cluster that is up"
		}
		return fmt.Errorf("%w: no Proxmox API answered at %s; check the address and the port (8006)%s (%v)", power.ErrUnreachable, d.host(), hint, err)
	}
	return fmt.Errorf("Proxmox API at %s: %w", d.host(), err)
}
