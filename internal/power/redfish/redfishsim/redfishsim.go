// Package redfishsim is a Redfish service for tests, written from the
// published DMTF Redfish specification (DSP0266) and schemas
// (ServiceRoot, ComputerSystemCollection, ComputerSystem with its
// #ComputerSystem.Reset action, SessionService and Session, and the
// error reply of the Base message registry): one ComputerSystem whose
// power follows the Reset types it is posted, behind basic and session
// authentication, over TLS.
package redfishsim

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/claimstream/claimstream/internal/testtools"
)

// The service's user (its role may Reset), and the system's path.
const (
	User       = "operator1"
	Password   = "s3cret-pw"
	SystemPath = "/redfish/v1/Systems/437XR1138R2"
)

// Options shape the simulated machine.
type Options struct {
	// IgnoreGraceful: GracefulShutdown is accepted and nothing happens,
	// as a machine whose operating system ignores the power button.
	IgnoreGraceful bool
	// Allowed is the Reset types the system advertises; On,
	// GracefulShutdown and ForceOff when nil.
	Allowed []string
}

// Server is a running service.
type Server struct {
	*httptest.Server
	// CAFile holds the server certificate (PEM), as a mounted CA file
	// would; Fingerprint is its SHA-256.
	CAFile      string
	Fingerprint []byte
	// PasswordFile holds Password, as a mounted Secret would.
	PasswordFile string

	opts Options

	mu         sync.Mutex
	power      string
	poweringOn bool
	sessions   map[string]string // token → session path
	nextID     int
	resets     []string
	basic      int
	opened     int
	deleted    int
}

// Start starts the service, the system off; it stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	if o.Allowed == nil {
		o.Allowed = []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart"}
	}
	s := &Server{opts: o, power: "Off", sessions: map[string]string{}}
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
	s.PasswordFile = filepath.Join(dir, "password")
	if err := os.WriteFile(s.PasswordFile, []byte(Password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// PowerState is the system's PowerState as the service holds it.
func (s *Server) PowerState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.power
}

// SetPowerState sets it.
func (s *Server) SetPowerState(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.power = p
}

// Resets are the Reset types posted, in order.
func (s *Server) Resets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.resets)
}

// Counts are the requests authenticated with basic auth, the sessions
// opened and those deleted.
func (s *Server) Counts() (basic, opened, deleted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.basic, s.opened, s.deleted
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("OData-Version", "4.0")
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == "/redfish" && r.Method == http.MethodGet:
		// The protocol versions the service speaks (DSP0266).
		reply(w, http.StatusOK, map[string]any{"v1": "/redfish/v1/"})
		return
	case path == "/redfish/v1" && r.Method == http.MethodGet:
		// The service root is readable without credentials (DSP0266).
		reply(w, http.StatusOK, map[string]any{
			"@odata.id":      "/redfish/v1/",
			"@odata.type":    "#ServiceRoot.v1_15_0.ServiceRoot",
			"Id":             "RootService",
			"Name":           "Root Service",
			"RedfishVersion": "1.17.0",
			"Systems":        ref("/redfish/v1/Systems"),
			"SessionService": ref("/redfish/v1/SessionService"),
			"Links":          map[string]any{"Sessions": ref("/redfish/v1/SessionService/Sessions")},
		})
		return
	case path == "/redfish/v1/SessionService/Sessions" && r.Method == http.MethodPost:
		var body struct{ UserName, Password string }
		if json.NewDecoder(r.Body).Decode(&body) != nil {
			fail(w, http.StatusBadRequest, "Base.1.16.MalformedJSON", "The request body submitted was malformed JSON and could not be parsed by the receiving service.")
			return
		}
		if !equal(body.UserName, User) || !equal(body.Password, Password) {
			fail(w, http.StatusUnauthorized, "Base.1.16.NoValidSession", "There is no valid session established with the implementation.")
			return
		}
		s.nextID++
		id := strconv.Itoa(s.nextID)
		tok := make([]byte, 16)
		rand.Read(tok)
		token := hex.EncodeToString(tok)
		loc := "/redfish/v1/SessionService/Sessions/" + id
		s.sessions[token] = loc
		s.opened++
		w.Header().Set("X-Auth-Token", token)
		w.Header().Set("Location", loc)
		reply(w, http.StatusCreated, map[string]any{
			"@odata.id":   loc,
			"@odata.type": "#Session.v1_7_0.Session",
			"Id":          id,
			"Name":        "User Session",
			"UserName":    body.UserName,
		})
		return
	}
	if !s.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="Redfish"`)
		fail(w, http.StatusUnauthorized, "Base.1.16.NoValidSession", "There is no valid session established with the implementation.")
		return
	}
	switch {
	case strings.HasPrefix(path, "/redfish/v1/SessionService/Sessions/") && r.Method == http.MethodDelete:
		for tok, loc := range s.sessions {
			if loc == path {
				delete(s.sessions, tok)
				s.deleted++
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		fail(w, http.StatusNotFound, "Base.1.16.ResourceMissingAtURI", "The resource at the URI "+path+" was not found.")
	case path == "/redfish/v1/Systems" && r.Method == http.MethodGet:
		reply(w, http.StatusOK, map[string]any{
			"@odata.id":           "/redfish/v1/Systems",
			"@odata.type":         "#ComputerSystemCollection.ComputerSystemCollection",
			"Name":                "Computer System Collection",
			"Members@odata.count": 1,
			"Members":             []any{ref(SystemPath)},
		})
	case path == SystemPath && r.Method == http.MethodGet:
		state := s.power
		if s.poweringOn {
			// One read sees the system on its way up.
			state, s.poweringOn = "PoweringOn", false
		}
		reply(w, http.StatusOK, map[string]any{
			"@odata.id":   SystemPath,
			"@odata.type": "#ComputerSystem.v1_20_0.ComputerSystem",
			"Id":          filepath.Base(SystemPath),
			"Name":        "WebFrontEnd483",
			"SystemType":  "Physical",
			"PowerState":  state,
			"Status":      map[string]any{"State": "Enabled", "Health": "OK"},
			"Actions": map[string]any{
				"#ComputerSystem.Reset": map[string]any{
					"target":                            SystemPath + "/Actions/ComputerSystem.Reset",
					"ResetType@Redfish.AllowableValues": s.opts.Allowed,
				},
			},
		})
	case path == SystemPath+"/Actions/ComputerSystem.Reset" && r.Method == http.MethodPost:
		var body struct{ ResetType string }
		if json.NewDecoder(r.Body).Decode(&body) != nil || body.ResetType == "" {
			fail(w, http.StatusBadRequest, "Base.1.16.ActionParameterMissing", "The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.")
			return
		}
		if !slices.Contains(s.opts.Allowed, body.ResetType) {
			fail(w, http.StatusBadRequest, "Base.1.16.ActionParameterNotSupported", "The parameter ResetType for the action ComputerSystem.Reset is not supported on the target resource.")
			return
		}
		s.resets = append(s.resets, body.ResetType)
		switch body.ResetType {
		case "On":
			if s.power != "On" {
				s.power, s.poweringOn = "On", true
			}
		case "ForceOff":
			s.power = "Off"
		case "GracefulShutdown":
			if !s.opts.IgnoreGraceful {
				s.power = "Off"
			}
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusNotFound, "Base.1.16.ResourceMissingAtURI", "The resource at the URI "+path+" was not found.")
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		_, ok := s.sessions[tok]
		return ok
	}
	u, p, ok := r.BasicAuth()
	if ok && equal(u, User) && equal(p, Password) {
		s.basic++
		return true
	}
	return false
}

// Redfishtool runs DMTF's redfishtool client (Debian package
// redfishtool) against the service with a session, "Systems -1" and
// args after it, and returns its output: the cross-check that the
// service's shapes are the ones another client speaks. Without it the
// test skips, or fails under CLAIMSTREAM_REQUIRE_REDFISHTOOL=1.
func (s *Server) Redfishtool(t testing.TB, args ...string) string {
	t.Helper()
	tool := testtools.Require(t, "CLAIMSTREAM_REQUIRE_REDFISHTOOL", "redfishtool", "redfishtool")[0]
	// It accepts the test's self-signed certificate without a CA.
	cmd := exec.Command(tool, append([]string{"-r", strings.TrimPrefix(s.URL, "https://"), "-u", User, "-p", Password,
		"-S", "Always", "-A", "Session", "-T", "10", "Systems", "-1"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redfishtool %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

func ref(path string) map[string]any { return map[string]any{"@odata.id": path} }

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// fail writes a Redfish error reply: the general error, its detail in
// @Message.ExtendedInfo.
func fail(w http.ResponseWriter, code int, messageID, message string) {
	reply(w, code, map[string]any{"error": map[string]any{
		"code":    "Base.1.16.GeneralError",
		"message": "A general error has occurred. See Resolution for information on how to resolve the error.",
		"@Message.ExtendedInfo": []any{map[string]any{
			"@odata.type": "#Message.v1_1_1.Message",
			"MessageId":   messageID,
			"Message":     message,
			"Severity":    "Critical",
		}},
	}})
}
