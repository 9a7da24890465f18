package proxmox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// What the driver reads of the Proxmox VE API's JSON: every reply is an
// object whose "data" holds the answer; an error reply adds "message"
// and, for bad parameters, "errors" (one message per parameter).

// envelope is a reply's "data", absent or null as nil.
func envelope(b []byte) (json.RawMessage, error) {
	var v struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	if bytes.Equal(v.Data, []byte("null")) {
		return nil, nil
	}
	return v.Data, nil
}

// decodeGuestStatus is a guest's status from status/current: "running"
// or "stopped".
func decodeGuestStatus(b []byte) (string, error) {
	data, err := envelope(b)
	if err != nil {
		return "", err
	}
	var v struct {
		Status *string `json:"status"`
	}
	if data == nil || json.Unmarshal(data, &v) != nil || v.Status == nil {
		return "", errors.New("no status in the reply")
	}
	return *v.Status, nil
}

// taskStatus is a task's state: Status "running" or "stopped", and once
// stopped its ExitStatus, "OK" or why it failed.
type taskStatus struct {
	Status     string `json:"status"`
	ExitStatus string `json:"exitstatus"`
}

// decodeTaskStatus is the reply of GET /nodes/{node}/tasks/{upid}/status.
func decodeTaskStatus(b []byte) (taskStatus, error) {
	data, err := envelope(b)
	if err != nil {
		return taskStatus{}, err
	}
	var v taskStatus
	if data == nil || json.Unmarshal(data, &v) != nil || (v.Status != "running" && v.Status != "stopped") {
		return taskStatus{}, errors.New("no task status in the reply")
	}
	return v, nil
}

// member is a node entry of /cluster/status.
type member struct {
	Name   string
	Online bool
	Local  bool
}

// flag is a boolean as the API writes it: 0 or 1, or true or false.
type flag bool

func (f *flag) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "1", "true":
		*f = true
	case "0", "false", "null":
		*f = false
	default:
		return fmt.Errorf("boolean %s: want 0 or 1", b)
	}
	return nil
}

// decodeClusterStatus is the nodes of /cluster/status, the cluster entry
// left out.
func decodeClusterStatus(b []byte) ([]member, error) {
	data, err := envelope(b)
	if err != nil {
		return nil, err
	}
	var entries []struct {
		Type   string `json:"type"`
		Name   string `json:"name"`
		Online flag   `json:"online"`
		Local  flag   `json:"local"`
	}
	if data == nil {
		return nil, errors.New("no data in the reply")
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, err
	}
	var out []member
	for _, e := range entries {
		if e.Type == "node" && e.Name != "" {
			out = append(out, member{Name: e.Name, Online: bool(e.Online), Local: bool(e.Local)})
		}
	}
	return out, nil
}

// decodeUPID is the task a guest action started: its UPID, which the
// API answers at once while the task runs on.
func decodeUPID(b []byte) (string, error) {
	data, err := envelope(b)
	if err != nil {
		return "", err
	}
	var upid string
	if data == nil || json.Unmarshal(data, &upid) != nil || !strings.HasPrefix(upid, "UPID:") || strings.ContainsAny(upid, "/?#") {
		return "", errors.New("no task UPID in the reply")
	}
	return upid, nil
}

// errorMessage is an error reply's message, the parameters' messages
// after it; "" when the body is not one.
func errorMessage(b []byte) string {
	var v struct {
		Message string            `json:"message"`
		Errors  map[string]string `json:"errors"`
	}
	if json.Unmarshal(b, &v) != nil {
		return ""
	}
	parts := []string{}
	if m := strings.TrimSpace(v.Message); m != "" {
		parts = append(parts, m)
	}
	params := make([]string, 0, len(v.Errors))
	for p := range v.Errors {
		params = append(params, p)
	}
	sort.Strings(params)
	for _, p := range params {
		if len(parts) < 4 {
			parts = append(parts, p+": "+strings.TrimSpace(v.Errors[p]))
		}
	}
	return clip(strings.Join(parts, "; "))
}

// clip bounds a message from the API for an error's text.
func clip(msg string) string {
	if len(msg) > 400 {
		msg = msg[:400]
	}
	return strings.ToValidUTF8(msg, "?")
}
