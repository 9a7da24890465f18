package rest

import "net/http"

// freshReads asks Options.FreshReads (handlers.Leadership's FreshReads)
// before an authenticated GET, so a follower never answers from views
// behind the log; a refusal is answered with its status (503 for
// Unavailable). Writes go through: the write gate answers them.
func (s *server) freshReads(next http.Handler) http.Handler {
	if s.opts.FreshReads == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.opts.FreshReads(r.Context()); err != nil {
			s.fail(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
