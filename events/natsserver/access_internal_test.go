package natsserver

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"
)

// The process's nkey is good on in-process connections only: even with its
// seed, nobody gets in through the client port.
func TestProcessIdentityIsInProcessOnly(t *testing.T) {
	proc, err := newProcessIdentity()
	if err != nil {
		t.Fatal(err)
	}
	orig := newProcessIdentity
	newProcessIdentity = func() (*processIdentity, error) { return proc, nil }
	t.Cleanup(func() { newProcessIdentity = orig })
	emb, err := StartEmbedded(EmbeddedConfig{Dir: t.TempDir(), NoSync: true, Listen: true, Host: "127.0.0.1", Port: -1,
		Access: Access{Subscribers: []Subscriber{{User: "reader", Password: "pw"}}, Streams: []string{"CLAIMSTREAM"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	if !emb.Conn.IsConnected() {
		t.Fatal("the process's own connection is down")
	}
	nc, err := nats.Connect(emb.ClientURL(), nats.Nkey(proc.pub, proc.kp.Sign), nats.NoReconnect())
	if err == nil {
		nc.Close()
		t.Fatal("the process's nkey connected over TCP")
	}
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("got %v, want an authorization error", err)
	}
}
