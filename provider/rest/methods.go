package rest

import (
	"fmt"
	"net/http"
	"strings"
)

// methodNotAllowed registers, for every path the API serves, a handler of
// the methods it does not serve: 405 with an Allow header naming those it
// does (RFC 9110 §15.5.6), instead of the catch-all's 404, which reads as
// "no such thing". A pattern with a method is more specific than the same
// path without one, so the real routes still win.
func methodNotAllowed(mux *http.ServeMux, wrap func(auth bool, h http.Handler) http.Handler) {
	methods := map[string][]string{}
	auth := map[string]bool{}
	var paths []string
	for _, r := range routes {
		if _, seen := methods[r.path]; !seen {
			paths = append(paths, r.path)
		}
		methods[r.path] = append(methods[r.path], r.method)
		if r.method == http.MethodGet {
			methods[r.path] = append(methods[r.path], http.MethodHead)
		}
		auth[r.path] = auth[r.path] || r.auth
	}
	for _, path := range paths {
		allow := strings.Join(methods[path], ", ")
		h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("%s %s: method not allowed (allowed: %s)", req.Method, req.URL.Path, allow))
		})
		mux.Handle(path, wrap(auth[path], h))
	}
}
