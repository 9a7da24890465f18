package events

import "github.com/nats-io/nats.go"

// ToMsg encodes e as a NATS message on subject, in binary mode (Encode).
func ToMsg(e Event, subject string) (*nats.Msg, error) {
	h, data, err := e.Encode()
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: subject, Header: nats.Header(h), Data: data}, nil
}
