package redfish

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// What the driver reads of the service's JSON (DMTF DSP0266 and the
// ServiceRoot, collection, ComputerSystem and error schemas).

type odataID struct {
	ID string `json:"@odata.id"`
}

type root struct {
	Systems  string
	Sessions string
}

func decodeRoot(b []byte) (root, error) {
	var v struct {
		Systems        odataID
		SessionService odataID
		Links          struct{ Sessions odataID }
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return root{}, fmt.Errorf("service root: %w", err)
	}
	r := root{}
	if localPath(v.Systems.ID) {
		r.Systems = v.Systems.ID
	}
	if localPath(v.Links.Sessions.ID) {
		r.Sessions = v.Links.Sessions.ID
	}
	return r, nil
}

func decodeCollection(b []byte) ([]string, error) {
	var v struct{ Members []odataID }
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range v.Members {
		if !localPath(m.ID) {
			return nil, fmt.Errorf("member %q is not a path on this service", m.ID)
		}
		out = append(out, m.ID)
	}
	return out, nil
}

func decodeSystem(b []byte) (*system, error) {
	var v struct {
		PowerState *string
		Actions    map[string]json.RawMessage
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	if v.PowerState == nil {
		return nil, errors.New("no PowerState")
	}
	sys := &system{PowerState: *v.PowerState}
	if raw, ok := v.Actions["#ComputerSystem.Reset"]; ok {
		var a struct {
			Target  string   `json:"target"`
			Allowed []string `json:"ResetType@Redfish.AllowableValues"`
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("#ComputerSystem.Reset: %w", err)
		}
		// The action is posted with the credentials: only to this service.
		if !localPath(a.Target) {
			return nil, fmt.Errorf("#ComputerSystem.Reset target %q is not a path on this service", a.Target)
		}
		sys.Reset = resetAction{Target: a.Target, Allowed: a.Allowed}
	}
	return sys, nil
}

// errorMessage is the message of a Redfish error reply, its extended
// messages after it; "" when the body is not one.
func errorMessage(b []byte) string {
	var v struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Extended []struct {
				Message string
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	parts := []string{}
	if m := strings.TrimSpace(v.Error.Message); m != "" {
		parts = append(parts, m)
	}
	for _, e := range v.Error.Extended {
		if m := strings.TrimSpace(e.Message); m != "" && len(parts) < 4 {
			parts = append(parts, m)
		}
	}
	msg := strings.Join(parts, "; ")
	if len(msg) > 400 {
		msg = msg[:400]
	}
	return strings.ToValidUTF8(msg, "?")
}

// localPath: p is an absolute path on the service itself, not a URL
// elsewhere or a scheme-relative "//host".
func localPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.ContainsAny(p, "?#\\ \t\r\n")
}
