package powercmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/internal/freeport"
	"github.com/claimstream/claimstream/internal/power"
	"github.com/claimstream/claimstream/internal/power/ipmi"
	"github.com/claimstream/claimstream/internal/power/ipmi/ipmisim"
	"github.com/claimstream/claimstream/internal/power/libvirt/libvirtd"
	"github.com/claimstream/claimstream/internal/power/proxmox/proxmoxsim"
	"github.com/claimstream/claimstream/internal/power/redfish/redfishsim"
	"github.com/claimstream/claimstream/internal/power/wol"
)

// exec runs `power args...` in process, with a termination log in a
// temporary directory, and returns its output line, its error and what
// it wrote to the termination log.
func exec(t *testing.T, args ...string) (string, error, string) {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(logFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := New()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--termination-log", logFile))
	err := cmd.ExecuteContext(context.Background())
	log, rerr := os.ReadFile(logFile)
	if rerr != nil {
		t.Fatal(rerr)
	}
	return strings.TrimSpace(out.String()), err, string(log)
}

func startSim(t *testing.T) *ipmisim.BMC {
	return ipmisim.Start(t, ipmisim.Options{}, func(ctx context.Context, port int) error {
		_, err := (&ipmi.Driver{Host: "127.0.0.1", Port: port, Username: ipmisim.User, Password: ipmisim.Password, CipherSuite: 3, Timeout: time.Second}).Status(ctx)
		return err
	})
}

func TestIPMIOnOffThroughTheCommand(t *testing.T) {
	b := startSim(t)
	id := "ipmi:127.0.0.1:" + strconv.Itoa(b.Port)
	args := func(verb string) []string {
		return []string{verb, "--driver", "ipmi", "--address", "127.0.0.1:" + strconv.Itoa(b.Port),
			"--username", ipmisim.User, "--password-file", b.PasswordFile, "--cipher-suite", "3",
			"--timeout", "20s", "--interval", "100ms"}
	}
	line, err, log := exec(t, args("on")...)
	if err != nil {
		t.Fatalf("on: %v (%s)", err, line)
	}
	if !strings.HasPrefix(line, "power on: "+id+" is on after ") {
		t.Fatalf("on printed %q", line)
	}
	if got := b.Ipmitool(t); got != "Chassis Power is on" {
		t.Fatalf("ipmitool after on: %q", got)
	}
	// The report is one the reactors read as a startup Job's: the
	// instance is the driver's name for the machine.
	rep, err := handlers.ParseJobReport(log)
	if err != nil || rep.InstanceID != id || rep.Address != "" {
		t.Fatalf("report %q read as %+v, %v", log, rep, err)
	}
	if log != `{"instanceID":"`+id+`","powerState":"on"}` {
		t.Fatalf("report %s", log)
	}

	line, err, _ = exec(t, args("on")...)
	if err != nil || line != "power on: "+id+" was already on; nothing sent" {
		t.Fatalf("on when on: %q, %v", line, err)
	}
	line, err, _ = exec(t, args("status")...)
	if err != nil || line != "power status: "+id+" is on" {
		t.Fatalf("status: %q, %v", line, err)
	}
	line, err, log = exec(t, append(args("off"), "--hard")...)
	if err != nil || !strings.HasPrefix(line, "power off: "+id+" is off after ") || !strings.Contains(log, `"powerState":"off"`) {
		t.Fatalf("off: %q, %v, report %s", line, err, log)
	}
	if got := b.Ipmitool(t); got != "Chassis Power is off" {
		t.Fatalf("ipmitool after off: %q", got)
	}
}

func TestIPMIWrongPasswordFromTheEnvironment(t *testing.T) {
	b := startSim(t)
	t.Setenv(EnvUsername, ipmisim.User)
	t.Setenv(EnvPassword, "not-the-password")
	line, err, log := exec(t, "on", "--driver", "ipmi", "--address", "127.0.0.1:"+strconv.Itoa(b.Port), "--cipher-suite", "3")
	if err == nil {
		t.Fatalf("on with a wrong password succeeded: %q", line)
	}
	if !strings.HasPrefix(err.Error(), "power on: WrongCredentials: wrong credentials: ") || !strings.HasPrefix(log, "WrongCredentials: wrong credentials: ") {
		t.Fatalf("error %q, log %q; want the reason first", err, log)
	}
	for _, s := range []string{line, err.Error(), log} {
		if strings.Contains(s, "not-the-password") {
			t.Fatalf("the password shows in %q", s)
		}
	}
	if got := b.Ipmitool(t); got != "Chassis Power is off" {
		t.Fatalf("ipmitool: %q; the chassis should not have moved", got)
	}
}

func TestWOLOnWaitsForTheMachine(t *testing.T) {
	// The machine: its network card (a UDP socket) and, once the packet
	// came, its ssh port (a TCP listener on a port picked beforehand).
	nic, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer nic.Close()
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	probe := "127.0.0.1:" + strconv.Itoa(ports[0])
	woke := make(chan []byte, 1)
	go func() {
		buf := make([]byte, 200)
		n, _, err := nic.ReadFromUDP(buf)
		if err != nil {
			close(woke)
			return
		}
		woke <- buf[:n]
	}()
	up := make(chan net.Listener, 1)
	go func() {
		pkt, ok := <-woke
		mac, _ := wol.ParseMAC("52:54:00:12:34:56")
		want, _ := wol.MagicPacket(mac, []byte{10, 0, 0, 9})
		if !ok || !bytes.Equal(pkt, want) {
			close(up)
			return
		}
		l, err := net.Listen("tcp", probe)
		if err != nil {
			close(up)
			return
		}
		up <- l
	}()
	secureOn := filepath.Join(t.TempDir(), "secureon")
	if err := os.WriteFile(secureOn, []byte("10.0.0.9\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	line, err, log := exec(t, "on", "--driver", "wol", "--mac", "52:54:00:12:34:56", "--broadcast", nic.LocalAddr().String(),
		"--repeat", "1", "--secureon-file", secureOn, "--probe", probe, "--timeout", "20s", "--interval", "50ms")
	if l, ok := <-up; ok {
		defer l.Close()
	} else {
		t.Fatal("the machine never received the magic packet it expects")
	}
	if err != nil || !strings.HasPrefix(line, "power on: wol:52:54:00:12:34:56 is on after ") {
		t.Fatalf("on: %q, %v", line, err)
	}
	rep, err := handlers.ParseJobReport(log)
	if err != nil || rep.InstanceID != "wol:52:54:00:12:34:56" || rep.Address != "127.0.0.1" {
		t.Fatalf("report %q read as %+v, %v", log, rep, err)
	}
}

func TestWOLOffIsUnsupported(t *testing.T) {
	ssh, err := net.Listen("tcp", "127.0.0.1:0") // the machine is on
	if err != nil {
		t.Fatal(err)
	}
	defer ssh.Close()
	_, err, log := exec(t, "off", "--driver", "wol", "--mac", "52:54:00:12:34:56", "--probe", ssh.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "Unsupported: not supported by this driver: Wake-on-LAN can only switch a machine on") || !strings.HasPrefix(log, "Unsupported: ") {
		t.Fatalf("off: %v, log %q", err, log)
	}
}

func TestFlagErrors(t *testing.T) {
	t.Setenv(EnvPassword, "")
	t.Setenv(EnvToken, "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"on"}, "--driver is required"},
		{[]string{"on", "--driver", "proxmux"}, `--driver "proxmux": want wol, ipmi, redfish, libvirt or proxmox`},
		{[]string{"on", "--driver", "proxmox", "--address", "pve1.lab", "--node", "pve1"}, "--driver proxmox needs --token-id"},
		{[]string{"on", "--driver", "proxmox", "--address", "pve1.lab", "--node", "pve1", "--token-id", "u@pve!t"}, "needs the API token's secret: --token-file or $" + EnvToken},
		{[]string{"on", "--driver", "proxmox", "--address", "pve1.lab", "--node", "pve1", "--token-id", "u@pve!t", "--token-file", "/nonexistent/token"}, "credentials file: open /nonexistent/token"},
		{[]string{"on", "--driver", "proxmox", "--address", "pve1.lab", "--node", "pve1", "--token-id", "u@pve!t", "--token", "x"}, "unknown flag: --token"},
		{[]string{"on", "extra"}, `unknown command "extra"`},
		{[]string{"on", "--driver", "redfish", "--address", "10.0.0.5", "--username", "u"}, "--driver redfish needs a password"},
		{[]string{"on", "--driver", "redfish", "--address", "10.0.0.5", "--username", "u", "--fingerprint", "AB:CD"}, "--driver redfish needs a password"},
		{[]string{"on", "--driver", "libvirt"}, "--driver libvirt needs --domain"},
		{[]string{"on", "--driver", "ipmi", "--address", "10.0.0.5", "--username", "u"}, "needs a password: --password-file or $" + EnvPassword},
		{[]string{"on", "--driver", "ipmi", "--address", "10.0.0.5", "--username", "u", "--password", "x"}, "unknown flag: --password"},
		{[]string{"on", "--driver", "wol", "--mac", "52:54:00:12:34:56"}, "needs --probe"},
		{[]string{"on", "--driver", "wol", "--mac", "52:54:00:12:34"}, "invalid MAC address"},
	} {
		_, err, _ := exec(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want %q", tc.args, err, tc.want)
		}
		var ee *ExitError
		if !errors.As(err, &ee) || ee.Code != ExitUsage {
			t.Errorf("%v: %v; want exit code %d", tc.args, err, ExitUsage)
		}
	}
}

// docs/power.md lists every flag of the command.
func TestDocsListEveryFlag(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "power.md"))
	if err != nil {
		t.Fatal(err)
	}
	New().PersistentFlags().VisitAll(func(f *pflag.Flag) {
		if !bytes.Contains(doc, []byte("`--"+f.Name+"`")) {
			t.Errorf("docs/power.md does not list --%s", f.Name)
		}
	})
	for _, env := range []string{EnvUsername, EnvPassword, EnvSecureOn, EnvToken} {
		if !bytes.Contains(doc, []byte(env)) {
			t.Errorf("docs/power.md does not name $%s", env)
		}
	}
}

func TestRedfishOnOffThroughTheCommand(t *testing.T) {
	s := redfishsim.Start(t, redfishsim.Options{})
	host := strings.TrimPrefix(s.URL, "https://")
	id := "redfish:" + host
	args := func(verb string, trust ...string) []string {
		return append([]string{verb, "--driver", "redfish", "--address", host, "--session",
			"--username", redfishsim.User, "--password-file", s.PasswordFile,
			"--timeout", "10s", "--interval", "20ms"}, trust...)
	}
	line, err, log := exec(t, args("on", "--ca-file", s.CAFile)...)
	if err != nil || !strings.HasPrefix(line, "power on: "+id+" is on after ") || s.PowerState() != "On" {
		t.Fatalf("on: %q, %v; service holds %s", line, err, s.PowerState())
	}
	if log != `{"instanceID":"`+id+`","powerState":"on"}` {
		t.Fatalf("report %s", log)
	}
	fp := "sha256 Fingerprint=" + power.FormatFingerprint(s.Fingerprint)
	line, err, _ = exec(t, args("off", "--hard", "--fingerprint", fp)...)
	if err != nil || !strings.HasPrefix(line, "power off: "+id+" is off after ") || s.PowerState() != "Off" {
		t.Fatalf("off: %q, %v; service holds %s", line, err, s.PowerState())
	}
	if got := s.Resets(); len(got) != 2 || got[1] != "ForceOff" {
		t.Fatalf("resets %v; want On then ForceOff", got)
	}
	_, err, log = exec(t, args("status")...)
	if err == nil || !strings.HasPrefix(log, "Failed: the certificate of the Redfish service at "+host+" is not trusted") {
		t.Fatalf("status without a CA: %v, log %q", err, log)
	}
	t.Setenv(EnvPassword, "not-the-password")
	_, err, log = exec(t, "on", "--driver", "redfish", "--address", s.URL, "--username", redfishsim.User, "--ca-file", s.CAFile)
	if err == nil || !strings.HasPrefix(log, "WrongCredentials: wrong credentials: the Redfish service at "+host+" refused user") || strings.Contains(log, "not-the-password") {
		t.Fatalf("wrong password: %v, log %q", err, log)
	}
}

func TestLibvirtOnOffThroughTheCommand(t *testing.T) {
	lv := libvirtd.Start(t, libvirtd.Options{})
	id := "libvirt:" + libvirtd.Domain + "@" + lv.Socket
	args := func(verb string) []string {
		return []string{verb, "--driver", "libvirt", "--address", lv.Socket, "--uri", libvirtd.URI, "--domain", libvirtd.Domain,
			"--timeout", "20s", "--interval", "50ms"}
	}
	line, err, log := exec(t, args("off")...)
	if err != nil || !strings.HasPrefix(line, "power off: "+id+" is off after ") || log != `{"instanceID":"`+id+`","powerState":"off"}` {
		t.Fatalf("off: %q, %v, report %s", line, err, log)
	}
	if got := lv.Domstate(t); got != "shut off" {
		t.Fatalf("virsh after off: %q", got)
	}
	line, err, _ = exec(t, args("on")...)
	if err != nil || !strings.HasPrefix(line, "power on: "+id+" is on after ") {
		t.Fatalf("on: %q, %v", line, err)
	}
	if got := lv.Domstate(t); got != "running" {
		t.Fatalf("virsh after on: %q", got)
	}
	line, err, _ = exec(t, args("status")...)
	if err != nil || line != "power status: "+id+" is on" {
		t.Fatalf("status: %q, %v", line, err)
	}
	_, err, log = exec(t, "status", "--driver", "libvirt", "--address", filepath.Join(t.TempDir(), "none"), "--domain", "vm")
	if err == nil || !strings.HasPrefix(log, "Unreachable: unreachable: no libvirt daemon answered at ") {
		t.Fatalf("no daemon: %v, log %q", err, log)
	}
}

func TestProxmoxThroughTheCommand(t *testing.T) {
	s := proxmoxsim.Start(t, proxmoxsim.Options{BootReads: 1})
	host := strings.TrimPrefix(s.URL, "https://")
	args := func(verb string, target ...string) []string {
		return append([]string{verb, "--driver", "proxmox", "--address", host, "--token-id", proxmoxsim.TokenID,
			"--token-file", s.SecretFile, "--ca-file", s.CAFile, "--timeout", "10s", "--interval", "10ms"}, target...)
	}
	vm := []string{"--node", proxmoxsim.Local, "--vmid", "100"}
	line, err, log := exec(t, args("on", vm...)...)
	if err != nil || !strings.HasPrefix(line, "power on: proxmox:pve1/qemu/100 is on after ") || !s.Running("qemu", 100) {
		t.Fatalf("on: %q, %v", line, err)
	}
	if log != `{"instanceID":"proxmox:pve1/qemu/100","powerState":"on"}` {
		t.Fatalf("report %s", log)
	}
	fp := "sha256 Fingerprint=" + power.FormatFingerprint(s.Fingerprint)
	line, err, _ = exec(t, append(args("off", vm...), "--hard", "--ca-file", "", "--fingerprint", fp)...)
	if err != nil || !strings.HasPrefix(line, "power off: proxmox:pve1/qemu/100 is off after ") || s.Running("qemu", 100) {
		t.Fatalf("off --hard: %q, %v", line, err)
	}
	if got := s.Actions(); len(got) != 2 || !strings.HasSuffix(got[1], "/qemu/100/status/stop") {
		t.Fatalf("actions %v; want start then stop", got)
	}
	line, err, _ = exec(t, args("on", "--node", proxmoxsim.Sleeper)...)
	if err != nil || !strings.HasPrefix(line, "power on: proxmox:node/pve2 is on after ") {
		t.Fatalf("wake a node: %q, %v", line, err)
	}
	line, err, _ = exec(t, args("status", "--node", proxmoxsim.Local, "--vmid", "200", "--kind", "lxc")...)
	if err != nil || line != "power status: proxmox:pve1/lxc/200 is off" {
		t.Fatalf("status of a container: %q, %v", line, err)
	}

	// The secret from the environment, and a wrong one.
	t.Setenv(EnvToken, "00000000-0000-4000-8000-000000000000")
	_, err, log = exec(t, "on", "--driver", "proxmox", "--address", host, "--token-id", proxmoxsim.TokenID, "--ca-file", s.CAFile, "--node", "pve1", "--vmid", "100")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitWrongCredentials ||
		!strings.HasPrefix(log, `WrongCredentials: wrong credentials: the Proxmox API at `+host+` refused the API token "`+proxmoxsim.TokenID+`"`) ||
		strings.Contains(log, "00000000-0000-4000-8000-000000000000") {
		t.Fatalf("wrong token: %v, log %q", err, log)
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("x: %w", power.ErrCredentials), ExitWrongCredentials},
		{fmt.Errorf("x: %w", power.ErrUnreachable), ExitUnreachable},
		{fmt.Errorf("x: %w", power.ErrNotReached), ExitStateNotReached},
		{fmt.Errorf("x: %w", power.ErrUnsupported), ExitUnsupported},
		{errors.New("HTTP 500"), ExitFailed},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	codes := map[int]bool{0: true}
	for _, c := range []int{ExitFailed, ExitUsage, ExitWrongCredentials, ExitUnreachable, ExitStateNotReached, ExitUnsupported} {
		if codes[c] {
			t.Fatalf("exit code %d given twice", c)
		}
		codes[c] = true
	}

	// A driver's failure through the command carries its code.
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvToken, "secret")
	_, err, _ = exec(t, "status", "--driver", "proxmox", "--address", "127.0.0.1:"+strconv.Itoa(ports[0]), "--node", "pve1", "--vmid", "100", "--token-id", "u@pve!t", "--request-timeout", "2s")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitUnreachable || !errors.Is(err, power.ErrUnreachable) {
		t.Fatalf("nothing listening: %v; want exit code %d", err, ExitUnreachable)
	}
}
