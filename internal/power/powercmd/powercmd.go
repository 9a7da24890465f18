// Package powercmd is `claimstream power`: a lifecycle Job's power
// action through one of the power drivers. It lives apart from package
// power because it builds every driver, and the drivers import power.
package powercmd

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/claimstream/claimstream/internal/power"
	"github.com/claimstream/claimstream/internal/power/ipmi"
	"github.com/claimstream/claimstream/internal/power/libvirt"
	"github.com/claimstream/claimstream/internal/power/proxmox"
	"github.com/claimstream/claimstream/internal/power/redfish"
	"github.com/claimstream/claimstream/internal/power/wol"
)

// The environment variables credentials may come from (a Secret's keys
// mapped with env.valueFrom), when no file is given.
const (
	EnvUsername = "CLAIMSTREAM_POWER_USERNAME"
	EnvPassword = "CLAIMSTREAM_POWER_PASSWORD"
	EnvSecureOn = "CLAIMSTREAM_POWER_SECUREON"
	EnvToken    = "CLAIMSTREAM_POWER_TOKEN"
)

// DefaultTerminationLog is where Kubernetes reads a container's
// termination message.
const DefaultTerminationLog = "/dev/termination-log"

// Report is the Job report written to the termination log: the fields
// of the startup Job report the reactors read (instanceID, address), and
// the power state seen, which they ignore.
type Report struct {
	InstanceID string `json:"instanceID"`
	Address    string `json:"address,omitempty"`
	PowerState string `json:"powerState"`
}

type flags struct {
	// files, when set, holds the credentials files' contents by name
	// (DriverFor), read in place of files and the environment.
	files map[string]string

	driver         string
	timeout        time.Duration
	interval       time.Duration
	terminationLog string

	// wol
	mac, broadcast, probe, secureOnFile string
	repeat                              int

	// ipmi
	address, username, usernameFile, passwordFile string
	hard                                          bool
	cipherSuite                                   int
	exchangeTimeout                               time.Duration

	// redfish
	system, caFile, fingerprint string
	session                     bool

	// libvirt
	uri, domain string

	// proxmox
	node, kind, tokenID, tokenFile string
	vmid                           int

	// redfish, libvirt, proxmox
	requestTimeout time.Duration
}

// New is the `power` command.
func New() *cobra.Command {
	var f flags
	root := &cobra.Command{
		Use:   "power on|off|status --driver wol|ipmi|redfish|libvirt|proxmox [flags]",
		Short: "Switch a machine on or off through its power controller, and wait for it",
		Long: `Switch a machine on or off through its power controller (a Wake-on-LAN
packet, a BMC, a libvirt daemon, the Proxmox VE API) and wait until it reports the asked state, or read its state.
A machine already in the asked state is left alone, and that is success.
Credentials come from files (a mounted Secret) or the environment, never
from flags. One line of outcome goes to standard output; when
/dev/termination-log exists, the Job report goes there. The exit code
names the failure: 2 usage, 3 WrongCredentials, 4 Unreachable,
5 StateNotReached, 6 Unsupported, 1 any other.`,
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &ExitError{Code: ExitUsage, Err: err}
	})
	f.register(root.PersistentFlags())

	for _, a := range []struct {
		verb, short string
		want        power.PowerState
	}{
		{"on", "Switch the machine on and wait until it is on", power.On},
		{"off", "Switch the machine off and wait until it is off", power.Off},
		{"status", "Print the machine's power state", ""},
	} {
		root.AddCommand(&cobra.Command{
			Use:   a.verb,
			Short: a.short,
			Args: func(cmd *cobra.Command, args []string) error {
				if err := cobra.NoArgs(cmd, args); err != nil {
					return &ExitError{Code: ExitUsage, Err: err}
				}
				return nil
			},
			RunE: func(cmd *cobra.Command, _ []string) error {
				return run(cmd.Context(), cmd.OutOrStdout(), &f, a.verb, a.want)
			},
		})
	}
	return root
}

// register defines the command's flags on p, bound to f.
func (f *flags) register(p *pflag.FlagSet) {
	p.StringVar(&f.driver, "driver", "", "power driver: wol, ipmi, redfish, libvirt or proxmox")
	p.DurationVar(&f.timeout, "timeout", 5*time.Minute, "how long on or off waits for the machine to reach the state")
	p.DurationVar(&f.interval, "interval", 2*time.Second, "time between two status reads while waiting")
	p.StringVar(&f.terminationLog, "termination-log", DefaultTerminationLog, "file the Job report is written to, when it exists")
	p.StringVar(&f.mac, "mac", "", "wol: the machine's MAC address")
	p.StringVar(&f.broadcast, "broadcast", "255.255.255.255", "wol: broadcast address or relay the magic packet goes to, host[:port] (port 9 when not given)")
	p.IntVar(&f.repeat, "repeat", 3, "wol: magic packets sent per on")
	p.StringVar(&f.probe, "probe", "", "wol: host:port on the machine that accepts TCP connections once it is up (its ssh or kubelet port)")
	p.StringVar(&f.secureOnFile, "secureon-file", "", "wol: file holding the SecureOn password (a.b.c.d or aa:bb:cc:dd:ee:ff; else $"+EnvSecureOn+")")
	p.StringVar(&f.address, "address", "", "ipmi: the BMC's host[:port] (port 623 when not given); redfish: the BMC's https://host[:port]; libvirt: the daemon's unix socket path or host:port ("+libvirt.DefaultSocket+" when not given); proxmox: the API's https://host:8006 (for a node, another member of its cluster)")
	p.StringVar(&f.username, "username", "", "ipmi, redfish: BMC user (else --username-file, else $"+EnvUsername+")")
	p.StringVar(&f.usernameFile, "username-file", "", "ipmi, redfish: file holding the BMC user")
	p.StringVar(&f.passwordFile, "password-file", "", "ipmi, redfish: file holding the BMC user's password (else $"+EnvPassword+")")
	p.BoolVar(&f.hard, "hard", false, "off cuts the power instead of asking the operating system to shut down: ipmi chassis power off, redfish ForceOff, libvirt destroy, proxmox stop")
	p.IntVar(&f.cipherSuite, "cipher-suite", 0, "ipmi: RMCP+ cipher suite ID; 0 takes the strongest the BMC offers")
	p.DurationVar(&f.exchangeTimeout, "exchange-timeout", 2*time.Second, "ipmi: bound on one exchange with the BMC (retried a few times)")
	p.StringVar(&f.system, "system", "", "redfish: the ComputerSystem's Id or path; empty takes the only one")
	p.BoolVar(&f.session, "session", false, "redfish: authenticate with a Redfish session (X-Auth-Token) instead of basic authentication")
	p.StringVar(&f.caFile, "ca-file", "", "redfish, proxmox: PEM file of the CA that signed the BMC's or host's certificate (else the system's roots)")
	p.StringVar(&f.fingerprint, "fingerprint", "", "redfish, proxmox: SHA-256 fingerprint of the BMC's or host's certificate, trusted without a CA (openssl x509 -noout -fingerprint -sha256)")
	p.StringVar(&f.uri, "uri", libvirt.DefaultURI, "libvirt: the hypervisor connection URI inside the daemon")
	p.StringVar(&f.domain, "domain", "", "libvirt: the domain's name")
	p.StringVar(&f.node, "node", "", "proxmox: the cluster node the guest runs on, or the node to switch when --vmid is not given")
	p.IntVar(&f.vmid, "vmid", 0, "proxmox: the guest's ID; without it the node itself is switched")
	p.StringVar(&f.kind, "kind", proxmox.QEMU, "proxmox: the guest's kind, qemu (a VM) or lxc (a container)")
	p.StringVar(&f.tokenID, "token-id", "", "proxmox: the API token's ID, USER@REALM!TOKENID (not secret)")
	p.StringVar(&f.tokenFile, "token-file", "", "proxmox: file holding the API token's secret (else $"+EnvToken+")")
	p.DurationVar(&f.requestTimeout, "request-timeout", 30*time.Second, "redfish, libvirt, proxmox: bound on one call to the BMC, daemon or API")
}

func run(ctx context.Context, out io.Writer, f *flags, verb string, want power.PowerState) error {
	if ctx == nil {
		ctx = context.Background()
	}
	d, addr, err := f.build(verb)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	var (
		r    power.Reading
		line string
	)
	if want == "" {
		r, err = d.Status(ctx)
		line = fmt.Sprintf("power status: %s is %s", r.ID, r.State)
	} else {
		var o power.Outcome
		o, err = power.Wait(ctx, d, want, power.Options{Timeout: f.timeout, Interval: f.interval})
		r = o.Reading
		if o.Already {
			line = fmt.Sprintf("power %s: %s was already %s; nothing sent", verb, r.ID, want)
		} else {
			line = fmt.Sprintf("power %s: %s is %s after %s", verb, r.ID, want, o.Took.Round(time.Second))
		}
	}
	if err != nil {
		reason := power.Reason(err)
		f.writeLog(reason + ": " + err.Error())
		return &ExitError{Code: exitCode(err), Err: fmt.Errorf("power %s: %s: %w", verb, reason, err)}
	}
	rep, _ := json.Marshal(Report{InstanceID: r.ID, Address: addr, PowerState: string(r.State)})
	f.writeLog(string(rep))
	_, err = fmt.Fprintln(out, line)
	return err
}

// writeLog writes msg to the termination log when the file exists (in a
// Job's container, not on a workstation).
func (f *flags) writeLog(msg string) {
	if f.terminationLog == "" {
		return
	}
	if _, err := os.Stat(f.terminationLog); err != nil {
		return
	}
	// Kubernetes keeps the first 4096 bytes.
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	os.WriteFile(f.terminationLog, []byte(msg), 0o644)
}

// build makes the driver from the flags, and the machine's address for
// the report when the driver knows it.
func (f *flags) build(verb string) (power.Driver, string, error) {
	switch f.driver {
	case "wol":
		if f.mac == "" {
			return nil, "", errors.New("--driver wol needs --mac")
		}
		mac, err := wol.ParseMAC(f.mac)
		if err != nil {
			return nil, "", err
		}
		pwText, err := f.secret(f.secureOnFile, EnvSecureOn)
		if err != nil {
			return nil, "", err
		}
		pw, err := wol.ParsePassword(pwText)
		if err != nil {
			return nil, "", err
		}
		if f.probe == "" && verb != "status" {
			return nil, "", errors.New("--driver wol needs --probe host:port to see the machine come up (a port it accepts TCP connections on once it is up)")
		}
		var addr string
		if f.probe != "" {
			host, _, err := net.SplitHostPort(f.probe)
			if err != nil {
				return nil, "", fmt.Errorf("--probe %q: %w", f.probe, err)
			}
			if net.ParseIP(host) != nil {
				addr = host
			}
		}
		return &wol.Driver{MAC: mac, Password: pw, Broadcast: f.broadcast, Repeat: f.repeat, Probe: f.probe}, addr, nil
	case "ipmi":
		if f.address == "" {
			return nil, "", errors.New("--driver ipmi needs --address, the BMC's host[:port]")
		}
		host, port := f.address, ipmi.DefaultPort
		if h, p, err := net.SplitHostPort(f.address); err == nil {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return nil, "", fmt.Errorf("--address %q: bad port", f.address)
			}
			host, port = h, n
		}
		user, pw, err := f.credentials()
		if err != nil {
			return nil, "", err
		}
		return &ipmi.Driver{Host: host, Port: port, Username: user, Password: pw, Hard: f.hard, CipherSuite: f.cipherSuite, Timeout: f.exchangeTimeout}, "", nil
	case "redfish":
		if f.address == "" {
			return nil, "", errors.New("--driver redfish needs --address, the BMC's https://host[:port]")
		}
		endpoint := f.address
		if !strings.Contains(endpoint, "://") {
			endpoint = "https://" + endpoint
		}
		user, pw, err := f.credentials()
		if err != nil {
			return nil, "", err
		}
		d := &redfish.Driver{Endpoint: endpoint, System: f.system, Username: user, Password: pw, Session: f.session, Force: f.hard, Timeout: f.requestTimeout}
		if d.RootCAs, d.Fingerprint, err = f.trust(); err != nil {
			return nil, "", err
		}
		return d, "", nil
	case "libvirt":
		if f.domain == "" {
			return nil, "", errors.New("--driver libvirt needs --domain, the domain's name")
		}
		return &libvirt.Driver{Address: f.address, URI: f.uri, Domain: f.domain, Force: f.hard, Timeout: f.requestTimeout}, "", nil
	case "proxmox":
		return f.buildProxmox()
	case "":
		return nil, "", errors.New("--driver is required: wol, ipmi, redfish, libvirt or proxmox")
	}
	return nil, "", fmt.Errorf("--driver %q: want wol, ipmi, redfish, libvirt or proxmox", f.driver)
}

// buildProxmox makes the proxmox driver: a guest with --vmid, else the
// node.
func (f *flags) buildProxmox() (power.Driver, string, error) {
	if f.address == "" {
		return nil, "", errors.New("--driver proxmox needs --address, the API's https://host:8006 (for a node, another member of its cluster)")
	}
	if f.node == "" {
		return nil, "", errors.New("--driver proxmox needs --node, the node the guest runs on or the node to switch")
	}
	if f.tokenID == "" {
		return nil, "", errors.New("--driver proxmox needs --token-id, the API token's USER@REALM!TOKENID")
	}
	endpoint := f.address
	if !strings.Contains(endpoint, "://") {
		endpoint = "https://" + endpoint
		if _, _, err := net.SplitHostPort(f.address); err != nil {
			endpoint += ":8006"
		}
	}
	secret, err := f.secret(f.tokenFile, EnvToken)
	if err != nil {
		return nil, "", err
	}
	if secret == "" {
		return nil, "", fmt.Errorf("--driver proxmox needs the API token's secret: --token-file or $%s", EnvToken)
	}
	d := &proxmox.Driver{Endpoint: endpoint, Node: f.node, VMID: f.vmid, Kind: f.kind, TokenID: f.tokenID, Secret: secret, Hard: f.hard, Timeout: f.requestTimeout}
	if d.RootCAs, d.Fingerprint, err = f.trust(); err != nil {
		return nil, "", err
	}
	if err := d.Validate(); err != nil {
		return nil, "", err
	}
	return d, "", nil
}

// trust is what --ca-file and --fingerprint give to check an HTTPS
// controller's certificate.
func (f *flags) trust() (*x509.CertPool, []byte, error) {
	var (
		roots *x509.CertPool
		fp    []byte
		err   error
	)
	if f.fingerprint != "" {
		if fp, err = power.ParseFingerprint(f.fingerprint); err != nil {
			return nil, nil, fmt.Errorf("--fingerprint: %w", err)
		}
	}
	if f.caFile != "" {
		pem, err := os.ReadFile(f.caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--ca-file: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", f.caFile)
		}
	}
	return roots, fp, nil
}

// credentials are the BMC user and password, both required.
func (f *flags) credentials() (user, password string, err error) {
	user = f.username
	if user == "" {
		if user, err = f.secret(f.usernameFile, EnvUsername); err != nil {
			return "", "", err
		}
	}
	if user == "" {
		return "", "", fmt.Errorf("--driver %s needs a user: --username, --username-file or $%s", f.driver, EnvUsername)
	}
	if password, err = f.secret(f.passwordFile, EnvPassword); err != nil {
		return "", "", err
	}
	if password == "" {
		return "", "", fmt.Errorf("--driver %s needs a password: --password-file or $%s", f.driver, EnvPassword)
	}
	return user, password, nil
}

// secret reads a credential from file, else from the environment
// variable env; a file's trailing newline (a Secret made with echo) is
// not part of it.
func (f *flags) secret(file, env string) (string, error) {
	if f.files != nil {
		// In process (DriverFor): the Secret's keys, never the environment.
		return strings.TrimRight(f.files[file], "\r\n"), nil
	}
	if file == "" {
		return os.Getenv(env), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("credentials file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}
