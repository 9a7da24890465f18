package rest

import "net/http"

// logUnwritable answers /readyz with 503 and the reason while the event log
// cannot be written: the process is alive but must not take traffic that
// writes.
func (s *server) logUnwritable(w http.ResponseWriter) bool {
	if s.opts.LogHealth == nil {
		return false
	}
	st := s.opts.LogHealth.Status()
	if st.Writable {
		return false
	}
	writeJSON(w, http.StatusServiceUnavailable, Health{Status: "log not writable", Seq: s.views.Seq(), Reason: st.Reason})
	return true
}
