package pool

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/claimstream/claimstream/events"
)

// powerFields are the fields each power driver reads, besides driver and
// ttlSecondsAfterFinished; required ones first. A field another driver
// reads is a mistake here, never silently ignored.
var powerFields = map[string]struct{ required, optional []string }{
	events.PowerWoL:     {[]string{"mac"}, []string{"broadcast", "probe", "credentialsSecret"}},
	events.PowerIPMI:    {[]string{"address", "credentialsSecret"}, []string{"hard", "cipherSuite"}},
	events.PowerRedfish: {[]string{"address", "credentialsSecret"}, []string{"hard", "system", "session", "fingerprint"}},
	events.PowerLibvirt: {[]string{"address", "domain"}, []string{"uri", "hard"}},
	events.PowerProxmox: {[]string{"address", "credentialsSecret", "tokenID", "node"}, []string{"vmid", "kind", "hard", "fingerprint"}},
	events.PowerExec:    {},
}

// powerBlock is a slot's power settings: its group's power block with the
// slot's own fields over it, and where each field was written.
type powerBlock struct {
	fields map[string]any
	at     map[string]string // field -> JSON pointer
	ptr    string            // the slot's power block, else its group's
}

// powerOf merges the power block of slot sm (at ptr) over its group's
// (groupPower, by group name); nil when neither has one.
func powerOf(sm map[string]any, ptr string, groupPower map[string]powerBlock) *powerBlock {
	group, _ := sm["group"].(string)
	gp, hasGroup := groupPower[group]
	own, hasOwn := sm["power"].(map[string]any)
	if !hasGroup && !hasOwn {
		return nil
	}
	b := &powerBlock{fields: map[string]any{}, at: map[string]string{}, ptr: gp.ptr}
	for k, v := range gp.fields {
		b.fields[k], b.at[k] = v, gp.at[k]
	}
	if hasOwn {
		b.ptr = ptr + "/power"
		for k, v := range own {
			b.fields[k], b.at[k] = v, ptr+"/power/"+escapeToken(k)
		}
	}
	return b
}

// groupPowers reads the groups' power blocks, the template of their slots'.
func groupPowers(groups []any) map[string]powerBlock {
	out := map[string]powerBlock{}
	for i, g := range groups {
		gm, _ := g.(map[string]any)
		pm, ok := gm["power"].(map[string]any)
		name, named := gm["name"].(string)
		if !ok || !named {
			continue
		}
		if _, dup := out[name]; dup {
			continue
		}
		ptr := pointer("groups", strconv.Itoa(i), "power")
		b := powerBlock{fields: pm, at: map[string]string{}, ptr: ptr}
		for k := range pm {
			b.at[k] = ptr + "/" + escapeToken(k)
		}
		out[name] = b
	}
	return out
}

var (
	tokenIDForm = regexp.MustCompile(`^[^@!\s]+@[^@!\s]+![A-Za-z0-9][A-Za-z0-9._-]*$`)
	hexDigits   = regexp.MustCompile(`^[0-9A-Fa-f]{64}$`)
)

// powers checks every slot's power settings, merged over its group's:
// a known driver, the fields it needs, none it does not read, each value
// of the form `claimstream power` takes.
func (c *checker) powers(groups, slots []any) {
	gp := groupPowers(groups)
	// A group's field is judged once, not once per slot of the group.
	before := len(c.problems)
	defer func() {
		seen := map[Problem]bool{}
		kept := c.problems[:before]
		for _, p := range c.problems[before:] {
			if !seen[p] {
				seen[p] = true
				kept = append(kept, p)
			}
		}
		c.problems = kept
	}()
	for i, s := range slots {
		sm, _ := s.(map[string]any)
		ptr := pointer("slots", strconv.Itoa(i))
		b := powerOf(sm, ptr, gp)
		if b == nil {
			continue
		}
		// What the slot lacks is said at the slot: at its power block, else
		// at its entry (the group's block serves all its slots).
		missing, prefix := b.ptr, ""
		if _, own := sm["power"]; !own {
			missing, prefix = ptr, "power: "
		}
		driver, ok := b.fields["driver"].(string)
		if !ok {
			if _, set := b.fields["driver"]; !set {
				c.add(missing, "%sdriver is required: one of %s (in the slot's power block or its group's)", prefix, driverList())
			}
			continue // a driver of the wrong type: the schema said so
		}
		spec, known := powerFields[driver]
		if !known {
			continue // the schema's enum said so
		}
		for _, f := range spec.required {
			if _, set := b.fields[f]; !set {
				c.add(missing, "%sdriver %s needs %s (in the slot's power block or its group's)", prefix, driver, f)
			}
		}
		for _, f := range sortedKeys(b.fields) {
			if f == "driver" || f == "ttlSecondsAfterFinished" || slices.Contains(spec.required, f) || slices.Contains(spec.optional, f) {
				continue
			}
			c.add(b.at[f], "is not read by driver %s (it reads %s)", driver, fieldList(spec.required, spec.optional))
		}
		c.powerValues(driver, b, missing, prefix)
		startup, _ := sm["startup"].(map[string]any)
		shutdown, _ := sm["shutdown"].(map[string]any)
		switch {
		case driver == events.PowerExec && (startup == nil || shutdown == nil):
			c.add(b.at["driver"], "driver exec runs the slot's startup and shutdown pod specs as written: give both")
		case driver == events.PowerWoL && shutdown == nil:
			c.add(missing, "%sdriver wol only wakes a machine: give the slot a shutdown pod spec that switches it off (an ssh poweroff, a smart plug)", prefix)
		}
		if driver == events.PowerWoL {
			if _, set := b.fields["probe"]; !set {
				if addr, _ := sm["address"].(string); addr == "" {
					c.add(missing, "%sdriver wol needs probe (a host:port the machine accepts TCP connections on once up) or the slot's address (probed on port 22)", prefix)
				}
			}
		}
	}
}

func (c *checker) powerValues(driver string, b *powerBlock, missing, prefix string) {
	str := func(f string) (string, string, bool) {
		v, ok := b.fields[f].(string)
		return v, b.at[f], ok
	}
	if v, at, ok := str("credentialsSecret"); ok {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			c.add(at, "must be the name of a Secret in the Jobs' namespace: %s", strings.Join(errs, "; "))
		}
	}
	if v, at, ok := str("mac"); ok {
		if hw, err := net.ParseMAC(v); err != nil || len(hw) != 6 {
			c.add(at, "must be a MAC address such as 52:54:00:12:34:56 (got %q)", v)
		}
	}
	if v, at, ok := str("probe"); ok {
		if _, err := hostPort(v, true); err != nil {
			c.add(at, "must be host:port, the port the machine accepts TCP connections on once up (got %q): %v", v, err)
		}
	}
	if v, at, ok := str("broadcast"); ok {
		if _, err := hostPort(v, false); err != nil {
			c.add(at, "must be an address or host, with an optional :port (got %q): %v", v, err)
		}
	}
	if v, at, ok := str("fingerprint"); ok {
		if !hexDigits.MatchString(strings.ReplaceAll(v, ":", "")) {
			c.add(at, "must be a SHA-256 fingerprint: 64 hex digits, colons allowed (got %q)", v)
		}
	}
	if v, at, ok := str("tokenID"); ok && !tokenIDForm.MatchString(v) {
		c.add(at, "must be a Proxmox API token id USER@REALM!TOKENID (got %q); the secret goes in the Secret's key token", v)
	}
	if v, at, ok := str("node"); ok {
		if errs := validation.IsDNS1123Label(strings.ToLower(v)); len(errs) > 0 {
			c.add(at, "must be a Proxmox node name (got %q)", v)
		}
	}
	if v, at, ok := str("address"); ok {
		var err error
		switch driver {
		case events.PowerIPMI:
			_, err = hostPort(v, false)
		case events.PowerLibvirt:
			if _, err = hostPort(v, true); err != nil {
				err = fmt.Errorf("%w; a lifecycle Job reaches libvirtd over TCP (listen_tcp), not its unix socket", err)
			}
		case events.PowerRedfish, events.PowerProxmox:
			err = httpsURL(v)
		}
		if err != nil {
			c.add(at, "%v (got %q)", err, v)
		}
	}
	if driver == events.PowerProxmox {
		_, guest := b.fields["vmid"]
		if _, set := b.fields["kind"]; set && !guest {
			c.add(b.at["kind"], "is the kind of a guest (vmid); without vmid the node itself is switched")
		}
		if hard, _ := b.fields["hard"].(bool); hard && !guest {
			c.add(b.at["hard"], "the Proxmox API cannot cut a node's power; a node is shut down by its operating system")
		}
	}
}

// hostPort checks host[:port]; needPort asks for the port.
func hostPort(s string, needPort bool) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if needPort || strings.Contains(s, "/") || s == "" {
			return "", fmt.Errorf("not host:port")
		}
		host = s
	} else if n, perr := strconv.Atoi(port); perr != nil || n <= 0 || n > 65535 {
		return "", fmt.Errorf("bad port %q", port)
	}
	if host == "" || strings.ContainsAny(host, " /") {
		return "", fmt.Errorf("no host")
	}
	return host, nil
}

func httpsURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return fmt.Errorf("must be an https:// URL of the controller, such as https://10.0.0.21 or https://pve.lan:8006")
	}
	return nil
}

func driverList() string {
	names := make([]string, 0, len(powerFields))
	for d := range powerFields {
		names = append(names, d)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func fieldList(required, optional []string) string {
	all := append(slices.Clone(required), optional...)
	if len(all) == 0 {
		return "no other field"
	}
	return strings.Join(all, ", ")
}

// decodePower is the slot's Power, merged over its group's, with the
// defaults applied (a wol probe of the slot's address on port 22).
func decodePower(b *powerBlock, address string) (*events.Power, *int32, error) {
	m := copyMap(b.fields)
	var ttl *int32
	if v, ok := integer(m["ttlSecondsAfterFinished"]); ok {
		t := int32(v)
		ttl = &t
	}
	delete(m, "ttlSecondsAfterFinished")
	var p events.Power
	if err := strictJSON(m, &p); err != nil {
		return nil, nil, err
	}
	if p.Driver == events.PowerWoL && p.Probe == "" && address != "" {
		p.Probe = net.JoinHostPort(address, "22")
	}
	if p.Fingerprint != "" {
		p.Fingerprint = strings.ToUpper(strings.ReplaceAll(p.Fingerprint, ":", ""))
		if _, err := hex.DecodeString(p.Fingerprint); err != nil {
			return nil, nil, err
		}
	}
	return &p, ttl, nil
}

// powerJobs fills the slot's lifecycle Jobs from its power block: a pod
// spec written in the file wins over the driver.
func powerJobs(b *powerBlock, spec *events.SlotSpec) error {
	p, ttl, err := decodePower(b, spec.Address)
	if err != nil {
		return err
	}
	if p.Driver == events.PowerExec {
		return nil
	}
	if spec.Startup == nil {
		spec.Startup = &events.JobSpec{Power: p, TTLSecondsAfterFinished: ttl}
	}
	if spec.Shutdown == nil {
		off := *p
		spec.Shutdown = &events.JobSpec{Power: &off, TTLSecondsAfterFinished: ttl}
	}
	return nil
}
