package serve

import (
	"errors"
	"net/http"
	"net/http/pprof"
)

// pprofHelp is the help of serve's --pprof flag.
const pprofHelp = "serve Go's profiles (net/http/pprof) under /debug/pprof/ on the metrics address (off by default; needs --metrics-address)"

// mountPprof adds Go's profiling endpoints to the metrics mux. They are
// mounted explicitly, not through net/http/pprof's init, which registers
// them on http.DefaultServeMux: the REST API and the provider never serve
// them, only the metrics address, which an operator keeps on loopback or
// inside the pod's network. The command line is not served: it holds
// --api-token (and any other secret given as a flag), and the profiles do
// not need it.
func mountPprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "not served: the command line may hold secrets (--api-token)", http.StatusNotFound)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// errPprofWithoutMetrics refuses --pprof with no metrics address: the
// profiles would be asked for and served nowhere.
var errPprofWithoutMetrics = errors.New("--pprof needs a --metrics-address: the profiles are served there only")
