package handlers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// JobReport is what a provisioning Job reports of the instance it bought,
// in its termination message: JSON ({"instanceID": ..., "providerID": ...,
// "address": ..., "node": ...}) or key=value lines (instance-id=...).
type JobReport struct {
	InstanceID string `json:"instanceID"`
	ProviderID string `json:"providerID"`
	Address    string `json:"address"`
	Node       string `json:"node"`
}

// maxJobReport bounds a termination message (Kubernetes keeps 4096 bytes).
const maxJobReport = 4096

// ParseJobReport reads a termination message. An empty message is no
// report: a Job that bought nothing (a Wake-on-LAN, a power switch), whose
// host is the slot's own. Anything else must be a whole report naming its
// instance; a message it cannot read is an error, never a report with
// fields left out, because the host it names could then not be matched.
func ParseJobReport(msg string) (JobReport, error) {
	var rep JobReport
	msg = strings.TrimSpace(msg)
	switch {
	case msg == "":
		return rep, nil
	case len(msg) > maxJobReport:
		return rep, fmt.Errorf("report of %d bytes, more than %d", len(msg), maxJobReport)
	case strings.HasPrefix(msg, "{"):
		dec := json.NewDecoder(strings.NewReader(msg))
		if err := dec.Decode(&rep); err != nil {
			return JobReport{}, fmt.Errorf("JSON report: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return JobReport{}, errors.New("JSON report: text after the object")
		}
	default:
		for i, line := range strings.Split(msg, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			k, val, ok := strings.Cut(line, "=")
			if !ok {
				return JobReport{}, fmt.Errorf("line %d %q is not key=value", i+1, clip(line))
			}
			val = strings.TrimSpace(val)
			switch strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(strings.TrimSpace(k))) {
			case "instanceid":
				rep.InstanceID = val
			case "providerid":
				rep.ProviderID = val
			case "address":
				rep.Address = val
			case "node", "nodename":
				rep.Node = val
			}
		}
	}
	if err := rep.validate(); err != nil {
		return JobReport{}, err
	}
	return rep, nil
}

func (r JobReport) validate() error {
	if r.InstanceID == "" {
		return errors.New("the report names no instance id (instance-id=... or {\"instanceID\": ...})")
	}
	for _, f := range []struct{ name, val string }{{"instance id", r.InstanceID}, {"providerID", r.ProviderID}, {"address", r.Address}} {
		if strings.IndexFunc(f.val, func(c rune) bool { return unicode.IsSpace(c) || !unicode.IsPrint(c) }) >= 0 {
			return fmt.Errorf("%s %q contains spaces or control characters", f.name, clip(f.val))
		}
	}
	if r.Node != "" {
		if errs := validation.IsDNS1123Subdomain(r.Node); len(errs) > 0 {
			return fmt.Errorf("node %q is not a valid Node name: %s", clip(r.Node), strings.Join(errs, "; "))
		}
	}
	return nil
}

// clip shortens what an error quotes.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
