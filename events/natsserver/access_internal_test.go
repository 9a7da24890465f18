package natsserver

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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

// With the subscribers' account defined, the server turns JetStream on
// for both accounts as it starts, from their configuration: nothing this
// package does after the start is needed (a clustered replica's meta layer
// may create the accounts' streams from then on). The subscribers'
// account has its limits.
func TestAccountsHaveJetStreamFromTheStart(t *testing.T) {
	proc, err := newProcessIdentity()
	if err != nil {
		t.Fatal(err)
	}
	copier, err := newProcessIdentity()
	if err != nil {
		t.Fatal(err)
	}
	a := Access{Subscribers: []Subscriber{{User: "reader", Password: "pw"}}, Streams: []string{"CLAIMSTREAM", "OTHER"}, SubscriberConsumers: 7}
	opts := &server.Options{ServerName: "s", DontListen: true, NoSigs: true, NoLog: true, JetStream: true, StoreDir: t.TempDir()}
	if err := a.configure(opts, proc, copier); err != nil {
		t.Fatal(err)
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	if !ns.GlobalAccount().JetStreamEnabled() {
		t.Fatal("the process's account started without JetStream")
	}
	sub, err := ns.LookupAccount(SubscribersAccount)
	if err != nil {
		t.Fatal(err)
	}
	if !sub.JetStreamEnabled() {
		t.Fatal("the subscribers' account started without JetStream")
	}
	want := server.JetStreamAccountLimits{MaxMemory: 0, MaxStore: -1, MaxStreams: 2, MaxConsumers: 7}
	if got := sub.JetStreamUsage().Limits; got != want {
		t.Fatalf("subscribers' account limits %+v, want %+v", got, want)
	}
	if err := a.checkJetStream(ns); err != nil {
		t.Fatal(err)
	}
}
