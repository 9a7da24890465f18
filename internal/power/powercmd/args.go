package powercmd

import (
	"fmt"
	"path"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/internal/power"
)

// The keys of a power driver's credentials Secret, each a file where it
// is mounted.
const (
	KeyUsername = "username"
	KeyPassword = "password"
	KeyToken    = "token"
	KeySecureOn = "secureon"
)

// Args are the command line of `claimstream power <verb>` for the pool's
// power block p: the verb, --driver and the driver's flags, credentials
// as files of the Secret mounted at credentialsDir. It is the one place
// a pool field becomes a flag.
func Args(p events.Power, verb, credentialsDir string) ([]string, error) {
	args := []string{verb, "--driver", p.Driver}
	flag := func(name, value string) {
		if value != "" {
			args = append(args, "--"+name, value)
		}
	}
	file := func(name, key string) { flag(name, path.Join(credentialsDir, key)) }
	switch p.Driver {
	case events.PowerWoL:
		flag("mac", p.MAC)
		flag("broadcast", p.Broadcast)
		flag("probe", p.Probe)
		if p.CredentialsSecret != "" {
			file("secureon-file", KeySecureOn)
		}
	case events.PowerIPMI:
		flag("address", p.Address)
		file("username-file", KeyUsername)
		file("password-file", KeyPassword)
		if p.CipherSuite != 0 {
			flag("cipher-suite", strconv.Itoa(p.CipherSuite))
		}
	case events.PowerRedfish:
		flag("address", p.Address)
		file("username-file", KeyUsername)
		file("password-file", KeyPassword)
		flag("system", p.System)
		flag("fingerprint", p.Fingerprint)
		if p.Session {
			args = append(args, "--session")
		}
	case events.PowerLibvirt:
		flag("address", p.Address)
		flag("uri", p.URI)
		flag("domain", p.Domain)
	case events.PowerProxmox:
		flag("address", p.Address)
		flag("node", p.Node)
		if p.VMID != 0 {
			flag("vmid", strconv.Itoa(p.VMID))
		}
		flag("kind", p.Kind)
		flag("token-id", p.TokenID)
		file("token-file", KeyToken)
		flag("fingerprint", p.Fingerprint)
	default:
		return nil, fmt.Errorf("power driver %q: not one this claimstream knows", p.Driver)
	}
	if p.Hard && verb == "off" {
		args = append(args, "--hard")
	}
	return args, nil
}

// DriverFor is the driver the pool's power block p names, with the
// credentials Secret's data in place of its mounted files: what serve
// reads a Node-less machine's state through.
func DriverFor(p events.Power, secret map[string][]byte) (power.Driver, error) {
	args, err := Args(p, "status", "")
	if err != nil {
		return nil, err
	}
	var f flags
	fs := pflag.NewFlagSet("power", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return nil, err
	}
	f.files = make(map[string]string, len(secret))
	for k, v := range secret {
		f.files[k] = string(v)
	}
	d, _, err := f.build("status")
	return d, err
}
