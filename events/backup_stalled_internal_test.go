package events

import (
	"encoding/json"
	"testing"
)

// The server's answer to a restore whose chunks stopped coming, as
// nats-server sends it, is recognised; its other restore failures are not.
func TestIsRestoreStalledReadsTheServersAnswer(t *testing.T) {
	for _, c := range []struct {
		answer string
		want   bool
	}{
		{`{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":500,"err_code":10062,"description":"restore failed: restore for stream '$G \u003e CLAIMSTREAM' is stalled"}}`, true},
		{`{"error":{"code":500,"err_code":10062,"description":"restore failed: unexpected EOF"}}`, false},
		{`{"error":{"code":400,"err_code":10058,"description":"stream name already in use with a different configuration"}}`, false},
	} {
		var ae apiError
		if err := json.Unmarshal([]byte(c.answer), &ae); err != nil {
			t.Fatal(err)
		}
		err := ae.err("restore CLAIMSTREAM: the server refused")
		if got := IsRestoreStalled(err); got != c.want {
			t.Errorf("IsRestoreStalled(%v) = %v, want %v", err, got, c.want)
		}
	}
	if IsRestoreStalled(nil) {
		t.Error("IsRestoreStalled(nil) = true")
	}
}
