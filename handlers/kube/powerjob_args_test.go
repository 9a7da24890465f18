package kube_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/internal/power/ipmi"
	"github.com/claimstream/claimstream/internal/power/ipmi/ipmisim"
	"github.com/claimstream/claimstream/internal/power/powercmd"
)

// runPower runs `claimstream power args...` in process, as the Job's
// container would, with a termination log in a temporary directory, and
// returns its output, its error and what it wrote to the termination log.
func runPower(t *testing.T, args ...string) (string, error, string) {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(logFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := powercmd.New()
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

func startBMC(t *testing.T) *ipmisim.BMC {
	return ipmisim.Start(t, ipmisim.Options{}, func(ctx context.Context, port int) error {
		_, err := (&ipmi.Driver{Host: "127.0.0.1", Port: port, Username: ipmisim.User, Password: ipmisim.Password, CipherSuite: 3, Timeout: time.Second}).Status(ctx)
		return err
	})
}

// jobArgs builds the lifecycle Job of a slot whose pool entry names power
// p, as the reactors would create it, and returns its container's
// arguments with the mounted Secret's directory moved to dir.
func jobArgs(t *testing.T, p events.Power, operation, dir string) []string {
	t.Helper()
	job, err := kube.BuildJob(kube.JobDefaults{Namespace: "ns", PowerImage: "registry.example/claimstream:v1"}, handlers.JobRequest{
		Name: "rack-1-" + operation, Slot: "rack-1", Operation: operation, Timeout: 2 * time.Minute,
		Spec: events.JobSpec{Power: &p},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if c.Command[0] != kube.PowerCommand || c.Args[0] != "power" {
		t.Fatalf("the Job runs %v %v, want %s power ...", c.Command, c.Args, kube.PowerCommand)
	}
	args := make([]string, 0, len(c.Args)-1)
	for _, a := range c.Args[1:] {
		args = append(args, strings.Replace(a, kube.PowerCredentialsPath, dir, 1))
	}
	return args
}

// The Jobs the pool's power block expands to switch a real BMC
// (ipmi_sim) on and off with the credentials of the mounted Secret: the
// arguments the Job passes are ones the command takes.
func TestPowerJobsSwitchTheBMC(t *testing.T) {
	b := startBMC(t)
	secret := t.TempDir()
	for k, v := range map[string]string{"username": ipmisim.User + "\n", "password": ipmisim.Password + "\n"} {
		if err := os.WriteFile(filepath.Join(secret, k), []byte(v), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	p := events.Power{Driver: events.PowerIPMI, Address: "127.0.0.1:" + strconv.Itoa(b.Port), CredentialsSecret: "bmc-rack", CipherSuite: 3, Hard: true}
	on := jobArgs(t, p, decide.OperationStartup, secret)
	line, err, log := runPower(t, append(on, "--interval", "100ms")...)
	if err != nil {
		t.Fatalf("startup Job: %v (%s)", err, line)
	}
	if got := b.Ipmitool(t); got != "Chassis Power is on" {
		t.Fatalf("ipmitool after the startup Job: %q", got)
	}
	if !strings.Contains(log, `"powerState":"on"`) {
		t.Fatalf("startup Job report %s", log)
	}
	off := jobArgs(t, p, decide.OperationShutdown, secret)
	line, err, log = runPower(t, append(off, "--interval", "100ms")...)
	if err != nil {
		t.Fatalf("shutdown Job: %v (%s)", err, line)
	}
	if got := b.Ipmitool(t); got != "Chassis Power is off" {
		t.Fatalf("ipmitool after the shutdown Job: %q", got)
	}
	if !strings.Contains(log, `"powerState":"off"`) {
		t.Fatalf("shutdown Job report %s", log)
	}
}

// Every driver's Job arguments parse as the command's flags, with the
// values of the pool's power block.
func TestPowerJobArgsAreTheCommandsFlags(t *testing.T) {
	dir := "/secret"
	for _, tc := range []struct {
		p    events.Power
		want map[string]string
	}{
		{events.Power{Driver: events.PowerWoL, MAC: "52:54:00:12:34:56", Broadcast: "10.0.1.255", Probe: "10.0.1.31:22", CredentialsSecret: "s"},
			map[string]string{"mac": "52:54:00:12:34:56", "broadcast": "10.0.1.255", "probe": "10.0.1.31:22", "secureon-file": "/secret/secureon"}},
		{events.Power{Driver: events.PowerIPMI, Address: "10.0.0.21", CredentialsSecret: "s", CipherSuite: 17, Hard: true},
			map[string]string{"address": "10.0.0.21", "username-file": "/secret/username", "password-file": "/secret/password", "cipher-suite": "17", "hard": "true"}},
		{events.Power{Driver: events.PowerRedfish, Address: "https://10.0.0.40", CredentialsSecret: "s", System: "1", Session: true, Fingerprint: strings.Repeat("AB", 32)},
			map[string]string{"address": "https://10.0.0.40", "system": "1", "session": "true", "fingerprint": strings.Repeat("AB", 32), "hard": "false"}},
		{events.Power{Driver: events.PowerProxmox, Address: "https://pve.lan:8006", CredentialsSecret: "s", TokenID: "root@pam!cs", Node: "pve1", VMID: 200, Kind: "lxc", Fingerprint: strings.Repeat("AB", 32), Hard: true},
			map[string]string{"address": "https://pve.lan:8006", "token-id": "root@pam!cs", "token-file": "/secret/token", "node": "pve1", "vmid": "200", "kind": "lxc", "fingerprint": strings.Repeat("AB", 32), "hard": "true"}},
		{events.Power{Driver: events.PowerLibvirt, Address: "hv.lan:16509", Domain: "vm-1", URI: "test:///default"},
			map[string]string{"address": "hv.lan:16509", "domain": "vm-1", "uri": "test:///default"}},
	} {
		t.Run(tc.p.Driver, func(t *testing.T) {
			args := jobArgs(t, tc.p, decide.OperationShutdown, dir)
			cmd, rest, err := powercmd.New().Find(args)
			if err != nil || cmd.Name() != "off" {
				t.Fatalf("%v: found %v, %v", args, cmd.Name(), err)
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			if d := cmd.Flags().Lookup("driver").Value.String(); d != tc.p.Driver {
				t.Errorf("--driver %s", d)
			}
			for name, want := range tc.want {
				if got := cmd.Flags().Lookup(name).Value.String(); got != want {
					t.Errorf("--%s = %q, want %q (args %v)", name, got, want, args)
				}
			}
			timeout, err := time.ParseDuration(cmd.Flags().Lookup("timeout").Value.String())
			if err != nil || timeout >= 2*time.Minute || timeout < time.Minute {
				t.Errorf("--timeout %v for a Job of 2m: want a little less than the Job's deadline", timeout)
			}
		})
	}
}
