package eventlog

import (
	"encoding/json"
	"errors"
	"testing"
)

// The server's answers to a restore, as nats-server sends them, are told
// apart by their codes: a stalled restore, a lost race and a cluster with
// no peer yet are each recognised, and no other refusal is taken for one.
func TestRestoreRefusalsAreToldApartByCode(t *testing.T) {
	for _, c := range []struct {
		answer string
		want   error
	}{
		{`{"type":"io.nats.jetstream.api.v1.stream_create_response","error":{"code":500,"err_code":10062,"description":"restore failed: restore for stream '$G \u003e CLAIMSTREAM' is stalled"}}`, ErrRestoreStalled},
		{`{"error":{"code":500,"err_code":10062,"description":"restore failed: unexpected EOF"}}`, nil},
		{`{"error":{"code":400,"err_code":10058,"description":"stream name already in use with a different configuration"}}`, ErrRestoreRaced},
		{`{"error":{"code":400,"err_code":10130,"description":"stream name already in use, cannot restore"}}`, ErrRestoreRaced},
		{`{"error":{"code":400,"err_code":10005,"description":"no suitable peers for placement"}}`, ErrRestoreNoPeers},
		{`{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`, nil},
	} {
		var ae apiError
		if err := json.Unmarshal([]byte(c.answer), &ae); err != nil {
			t.Fatal(err)
		}
		err := ae.err("restore CLAIMSTREAM: the server refused")
		for _, sentinel := range []error{ErrRestoreStalled, ErrRestoreRaced, ErrRestoreNoPeers} {
			if got, want := errors.Is(err, sentinel), sentinel == c.want; got != want {
				t.Errorf("errors.Is(%v, %v) = %v, want %v", err, sentinel, got, want)
			}
		}
	}
}
