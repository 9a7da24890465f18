// Package proxmoxsim is a Proxmox VE API for tests, written from the
// Proxmox VE API reference and administration guide: API token
// authentication (Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET),
// the {"data": ...} reply and its "message" on errors, a guest's
// status/current, status/start, status/shutdown (timeout, forceStop) and
// status/stop (each answered with the UPID of the task it starts, whose
// tasks/{upid}/status says how it ended), a
// node's wakeonlan (sent by the answering node, refused for itself) and
// its status command=shutdown, and /cluster/status, over TLS.
//
// The cluster has two nodes: Local, which answers and is up, and
// Sleeper, which is off and has a wake-on-LAN MAC. Local runs the QEMU
// VM VMID and the LXC container CTID, both stopped.
package proxmoxsim

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The token the API knows (its secret a UUID, as Proxmox makes them), the
// nodes and the guests.
const (
	TokenID    = "claimstream@pve!power"
	Secret     = "5f0c6f3e-2b1d-4c8e-9a7f-3d4e5f6a7b8c"
	Local      = "pve1"
	Sleeper    = "pve2"
	SleeperMAC = "52:54:00:aa:bb:02"
	VMID       = 100
	CTID       = 200
)

// Options shape the simulated cluster.
type Options struct {
	// BootReads is how many reads of a started guest's or woken node's
	// state still see it stopped or offline: it takes a moment to boot.
	BootReads int
	// NeverStart: a start task is accepted and the guest never runs.
	NeverStart bool
	// IgnoreShutdown: the guest ignores the shutdown (an ACPI event
	// nothing in it acts on) unless forceStop is given.
	IgnoreShutdown bool
	// NoPowerMgmt: the token has the Audit privileges and not PowerMgmt,
	// so every action is refused.
	NoPowerMgmt bool
	// FailStart, when set, is the exit status a start task ends with
	// (the task accepted, then failed: a locked guest, a missing disk);
	// the guest stays stopped.
	FailStart string
}

// Server is a running API.
type Server struct {
	*httptest.Server
	// CAFile holds the server certificate (PEM), as a mounted CA file
	// would; Fingerprint is its SHA-256.
	CAFile      string
	Fingerprint []byte
	// SecretFile holds Secret, as a mounted Secret would.
	SecretFile string

	opts Options

	mu       sync.Mutex
	guests   map[string]*machine // "qemu/100"
	nodes    map[string]*machine
	macs     map[string]string
	requests int
	actions  []string
	tasks    int
	exits    map[string]string // a task's exit status, by UPID
}

// machine is a guest or a node: running or online, and booting for as
// many reads as are left.
type machine struct {
	up      bool
	booting int
	never   bool
}

// read is one look at m: a booting machine comes up once its reads are
// spent.
func (m *machine) read() bool {
	if m.booting > 0 {
		m.booting--
		if m.booting == 0 && !m.never {
			m.up = true
		}
		return false
	}
	return m.up
}

func (m *machine) start(reads int, never bool) {
	m.never = never
	if reads == 0 && !never {
		m.up = true
		return
	}
	m.booting = max(reads, 1)
}

func (m *machine) stop() { m.up, m.booting = false, 0 }

// Start starts the API; it stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{
		opts:   o,
		guests: map[string]*machine{"qemu/" + strconv.Itoa(VMID): {}, "lxc/" + strconv.Itoa(CTID): {}},
		nodes:  map[string]*machine{Local: {up: true}, Sleeper: {}},
		macs:   map[string]string{Sleeper: SleeperMAC},
		exits:  map[string]string{},
	}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	cert := s.Certificate()
	sum := sha256.Sum256(cert.Raw)
	s.Fingerprint = sum[:]
	dir := t.TempDir()
	s.CAFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(s.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	s.SecretFile = filepath.Join(dir, "token")
	if err := os.WriteFile(s.SecretFile, []byte(Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// Running: the guest (kind "qemu" or "lxc") runs, as the host sees it,
// booting or not.
func (s *Server) Running(kind string, vmid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.guests[kind+"/"+strconv.Itoa(vmid)]
	return g != nil && (g.up || g.booting > 0 && !g.never)
}

// SetRunning sets a guest's state.
func (s *Server) SetRunning(kind string, vmid int, up bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.guests[kind+"/"+strconv.Itoa(vmid)] = &machine{up: up}
}

// Online: the node is up, booting or not.
func (s *Server) Online(node string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.nodes[node]
	return n != nil && (n.up || n.booting > 0)
}

// Actions are the actions accepted, in order: "POST <path> [params]".
func (s *Server) Actions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.actions)
}

// Requests is how many requests reached the API (past TLS).
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	path, ok := strings.CutPrefix(r.URL.Path, "/api2/json")
	if !ok {
		http.NotFound(w, r)
		return
	}
	if !authorized(r.Header.Get("Authorization")) {
		// The API puts the reason in the status line and sends no body.
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodPost && r.ParseForm() != nil {
		fail(w, http.StatusBadRequest, "Parameter verification failed.")
		return
	}
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case r.Method == http.MethodGet && path == "/cluster/status":
		s.clusterStatus(w)
	case len(parts) == 3 && parts[0] == "nodes" && parts[2] == "wakeonlan" && r.Method == http.MethodPost:
		s.wake(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "nodes" && parts[2] == "status" && r.Method == http.MethodPost:
		s.nodeCommand(w, r, parts[1])
	case len(parts) == 5 && parts[0] == "nodes" && parts[2] == "tasks" && parts[4] == "status" && r.Method == http.MethodGet:
		s.taskStatus(w, parts[1], parts[3])
	case len(parts) == 6 && parts[0] == "nodes" && (parts[2] == "qemu" || parts[2] == "lxc") && parts[4] == "status":
		s.guest(w, r, parts[1], parts[2], parts[3], parts[5])
	default:
		fail(w, http.StatusNotImplemented, fmt.Sprintf("Method '%s %s' not implemented", r.Method, path))
	}
}

func authorized(h string) bool {
	v, ok := strings.CutPrefix(h, "PVEAPIToken=")
	if !ok {
		return false
	}
	id, secret, _ := strings.Cut(v, "=")
	return equal(id, TokenID) && equal(secret, Secret)
}

func (s *Server) clusterStatus(w http.ResponseWriter) {
	online := 0
	entries := []any{}
	for i, name := range []string{Local, Sleeper} {
		n := s.nodes[name]
		up := 0
		if n.read() {
			up = 1
			online++
		}
		local := 0
		if name == Local {
			local = 1
		}
		entries = append(entries, map[string]any{
			"type": "node", "id": "node/" + name, "name": name, "nodeid": i + 1,
			"ip": "192.0.2." + strconv.Itoa(11+i), "online": up, "local": local, "level": "",
		})
	}
	cluster := map[string]any{"type": "cluster", "id": "cluster", "name": "lab", "nodes": 2, "version": 2, "quorate": 1}
	reply(w, append([]any{cluster}, entries...))
}

func (s *Server) permitted(w http.ResponseWriter, object, privilege string) bool {
	if s.opts.NoPowerMgmt {
		fail(w, http.StatusForbidden, fmt.Sprintf("Permission check failed (%s, %s)", object, privilege))
		return false
	}
	return true
}

func (s *Server) wake(w http.ResponseWriter, r *http.Request, node string) {
	if !s.permitted(w, "/nodes/"+node, "Sys.PowerMgmt") {
		return
	}
	// The answering node sends the packet; it cannot wake itself.
	if node == Local {
		fail(w, http.StatusInternalServerError, fmt.Sprintf("'%s' is local node, cannot wake my self!", node))
		return
	}
	n := s.nodes[node]
	if n == nil {
		fail(w, http.StatusInternalServerError, fmt.Sprintf("no such cluster node '%s'", node))
		return
	}
	mac := s.macs[node]
	if mac == "" {
		fail(w, http.StatusInternalServerError, fmt.Sprintf("No wake on LAN MAC address defined for '%s'!", node))
		return
	}
	s.actions = append(s.actions, "POST "+r.URL.Path)
	if !n.up && n.booting == 0 {
		n.start(s.opts.BootReads, false)
	}
	reply(w, mac)
}

func (s *Server) nodeCommand(w http.ResponseWriter, r *http.Request, node string) {
	if !s.permitted(w, "/nodes/"+node, "Sys.PowerMgmt") {
		return
	}
	n := s.nodes[node]
	if n == nil {
		fail(w, http.StatusInternalServerError, fmt.Sprintf("no such cluster node '%s'", node))
		return
	}
	cmd := r.PostForm.Get("command")
	if cmd != "shutdown" && cmd != "reboot" {
		failParam(w, "command", "value '"+cmd+"' does not have a value in the enumeration 'reboot, shutdown'")
		return
	}
	s.actions = append(s.actions, "POST "+r.URL.Path+" command="+cmd)
	if cmd == "shutdown" {
		n.stop()
	}
	reply(w, nil)
}

func (s *Server) guest(w http.ResponseWriter, r *http.Request, node, kind, vmid, action string) {
	g := s.guests[kind+"/"+vmid]
	if node != Local || g == nil {
		dir := "qemu-server"
		if kind == "lxc" {
			dir = "lxc"
		}
		fail(w, http.StatusInternalServerError, fmt.Sprintf("Configuration file 'nodes/%s/%s/%s.conf' does not exist", node, dir, vmid))
		return
	}
	if r.Method == http.MethodGet && action == "current" {
		status := "stopped"
		if g.read() {
			status = "running"
		}
		id, _ := strconv.Atoi(vmid)
		reply(w, map[string]any{"vmid": id, "status": status, "name": kind + "-" + vmid, "uptime": 0})
		return
	}
	if r.Method != http.MethodPost {
		fail(w, http.StatusNotImplemented, fmt.Sprintf("Method '%s %s' not implemented", r.Method, r.URL.Path))
		return
	}
	if !s.permitted(w, "/vms/"+vmid, "VM.PowerMgmt") {
		return
	}
	running := g.up || g.booting > 0 && !g.never
	task := map[string]string{"qemu": "qm", "lxc": "vz"}[kind] + action
	params, exit := "", "OK"
	switch action {
	case "start":
		if running {
			fail(w, http.StatusInternalServerError, fmt.Sprintf("VM %s already running", vmid))
			return
		}
		if s.opts.FailStart != "" {
			exit = s.opts.FailStart
			break
		}
		g.start(s.opts.BootReads, s.opts.NeverStart)
	case "shutdown":
		force := r.PostForm.Get("forceStop") == "1"
		if force {
			params = " forceStop=1"
		}
		if !s.opts.IgnoreShutdown || force {
			g.stop()
		}
	case "stop":
		g.stop()
	default:
		fail(w, http.StatusNotImplemented, fmt.Sprintf("Method 'POST %s' not implemented", r.URL.Path))
		return
	}
	s.actions = append(s.actions, "POST "+r.URL.Path+params)
	s.tasks++
	// UPID:node:pid:pstart:starttime:type:id:user: in hexadecimal where
	// numeric, as the API names a task.
	upid := fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", node, 4000+s.tasks, 123456+s.tasks, 1767225600+s.tasks, task, vmid, TokenID)
	s.exits[upid] = exit
	reply(w, upid)
}

// taskStatus answers a task's status: ended at once, with its exit status.
func (s *Server) taskStatus(w http.ResponseWriter, node, upid string) {
	exit, ok := s.exits[upid]
	if !ok || node != Local {
		fail(w, http.StatusInternalServerError, fmt.Sprintf("unable to parse worker upid '%s'", upid))
		return
	}
	reply(w, map[string]any{"upid": upid, "node": node, "status": "stopped", "exitstatus": exit})
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func reply(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// fail writes an error reply: the message in the body (and, in the real
// API, in the status line), with a newline as the API's die messages
// end.
func fail(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"data": nil, "message": message + "\n"})
}

func failParam(w http.ResponseWriter, param, message string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]any{"data": nil, "message": "Parameter verification failed.\n", "errors": map[string]string{param: message}})
}
