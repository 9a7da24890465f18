package eventlog

import (
	"github.com/nats-io/nats.go"

	"github.com/claimstream/claimstream/events"
)

// ToMsg encodes e as a NATS message on subject, in binary mode (Encode).
func ToMsg(e events.Event, subject string) (*nats.Msg, error) {
	h, data, err := e.Encode()
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: subject, Header: nats.Header(h), Data: data}, nil
}
