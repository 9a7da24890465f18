package events

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Access says who may use the embedded server, through nats-server's own
// authorization. Two kinds of identity exist:
//
//   - the process: an nkey user generated at every start, its seed held only
//     in memory, allowed on in-process connections only. It is the only
//     writer and JetStream administrator.
//   - subscribers: user/password identities allowed on the client port
//     (standard connections only), in an account of their own
//     (SubscribersAccount) that imports only the read API of Streams, and
//     with permissions for that API alone.
//
// Nobody connects without a credential: with no Subscribers, the client
// port, if open, lets no one in.
type Access struct {
	// Subscribers are the read-only identities of the client port.
	Subscribers []Subscriber
	// Streams are the streams subscribers may read: stream info, message
	// get and direct get, and pull consumers of their own (create, info,
	// fetch, ack, delete).
	Streams []string
	// ProtectedConsumers are consumers of the process on every stream of
	// Streams (the webhook sinks' durables): subscribers may neither
	// redefine them nor pull from or ack on them.
	ProtectedConsumers []string

	// clustered: the server is one of several. Accounts are cluster-wide
	// and must be the same on every replica, so the subscribers' account
	// is defined even where no subscriber is.
	clustered bool
}

// needsAccount: the subscribers' account is defined on this server.
func (a Access) needsAccount() bool { return len(a.Subscribers) > 0 || a.clustered }

// Subscriber is one read-only identity. Password may be a bcrypt hash
// ("$2a$..."), which nats-server compares as such.
type Subscriber struct {
	User     string
	Password string
}

// ProcessInboxPrefix is the inbox prefix of the process's own connection.
// Subscribers, besides living in another account, may subscribe to
// _INBOX.> (their own replies) only, never here: the replies the process
// gets name its consumers, which stay private.
const ProcessInboxPrefix = "_CLAIMSTREAM_INBOX"

// subscriberInboxes is where subscribers' replies arrive (nats.go's and the
// nats CLI's default).
const subscriberInboxes = "_INBOX.>"

// Validate reports the first unusable part of a.
func (a Access) Validate() error {
	seen := map[string]bool{}
	for _, s := range a.Subscribers {
		switch {
		case s.User == "":
			return errors.New("a subscriber has no user name")
		case strings.ContainsAny(s.User, " \t\r\n"):
			return fmt.Errorf("subscriber user %q contains white space", s.User)
		case s.Password == "":
			return fmt.Errorf("subscriber %s has an empty password", s.User)
		case seen[s.User]:
			return fmt.Errorf("subscriber %s is named twice", s.User)
		}
		seen[s.User] = true
	}
	for _, st := range a.Streams {
		if !validToken(st) {
			return fmt.Errorf("stream name %q is not one subject token", st)
		}
	}
	for _, c := range a.ProtectedConsumers {
		if !validToken(c) {
			return fmt.Errorf("consumer name %q is not one subject token", c)
		}
	}
	return nil
}

func validToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> \t\r\n")
}

// SubscriberPermissions are the read-only permissions of a subscriber: the
// exact JetStream API subjects needed to read Streams and to run consumers
// of one's own on them, and nothing else. What is not allowed is refused
// by the server: publishing to event subjects, stream create, update,
// delete and purge, message delete, snapshot and restore, consumer pause
// and reset, anything on a protected consumer, and listing consumers (the
// process's own are private; a name nobody can learn cannot be touched).
//
// Subscribers subscribe to their inboxes only. They read through pull
// consumers: a push consumer of theirs delivers in the process's account,
// where none of them listens, so it delivers nothing (and cannot copy the
// log into a stream).
func (a Access) SubscriberPermissions() *server.Permissions {
	pub := []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.LIST",
	}
	var deny []string
	for _, st := range a.Streams {
		pub = append(pub,
			"$JS.API.STREAM.INFO."+st,
			"$JS.API.STREAM.MSG.GET."+st,
			"$JS.API.DIRECT.GET."+st,
			"$JS.API.DIRECT.GET."+st+".>",
			// CREATE.<stream>.<consumer>[.<filter>]; the legacy form
			// CREATE.<stream> (name in the body) stays refused, since it
			// could name a protected consumer.
			"$JS.API.CONSUMER.CREATE."+st+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+st+".*",
			"$JS.API.CONSUMER.INFO."+st+".*",
			"$JS.API.CONSUMER.DELETE."+st+".*",
			"$JS.API.CONSUMER.MSG.NEXT."+st+".*",
			// Acks are replies to these subjects.
			"$JS.ACK."+st+".>",
		)
		for _, c := range a.ProtectedConsumers {
			deny = append(deny,
				"$JS.API.CONSUMER.CREATE."+st+"."+c,
				"$JS.API.CONSUMER.CREATE."+st+"."+c+".>",
				"$JS.API.CONSUMER.DURABLE.CREATE."+st+"."+c,
				"$JS.API.CONSUMER.DELETE."+st+"."+c,
				"$JS.API.CONSUMER.MSG.NEXT."+st+"."+c,
				"$JS.ACK."+st+"."+c+".>",
			)
		}
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: pub, Deny: deny},
		Subscribe: &server.SubjectPermission{Allow: []string{subscriberInboxes}},
	}
}

// processIdentity is the process's own credential: a fresh nkey pair. The
// server keeps only the public key; the seed never leaves this memory.
type processIdentity struct {
	kp  nkeys.KeyPair
	pub string
}

// newProcessIdentity is a variable so that a test can keep the seed.
var newProcessIdentity = func() (*processIdentity, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("generate the process's nkey: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, fmt.Errorf("process nkey: %w", err)
	}
	return &processIdentity{kp: kp, pub: pub}, nil
}

// SubscribersAccount is the NATS account of the subscriber identities. It
// has a subject space of its own: nothing a subscriber publishes, and no
// reply the server sends it, lands in the process's account, where the
// streams are. It reaches the process's streams only through the read
// API services the process's account exports to it.
const SubscribersAccount = "SUBSCRIBERS"

// configure puts both kinds of identity into the server's options.
func (a Access) configure(opts *server.Options, proc *processIdentity) {
	opts.Nkeys = []*server.NkeyUser{{
		Nkey: proc.pub,
		// No permissions: everything. In-process only: the key is
		// useless on the client port even if it leaked.
		AllowedConnectionTypes: map[string]struct{}{jwt.ConnectionTypeInProcess: {}},
	}}
	opts.Users, opts.Accounts = nil, nil
	if !a.needsAccount() {
		return
	}
	acc := server.NewAccount(SubscribersAccount)
	opts.Accounts = []*server.Account{acc}
	perms := a.SubscriberPermissions()
	for _, s := range a.Subscribers {
		opts.Users = append(opts.Users, &server.User{
			Username:               s.User,
			Password:               s.Password,
			Permissions:            perms,
			Account:                acc,
			AllowedConnectionTypes: map[string]struct{}{jwt.ConnectionTypeStandard: {}},
		})
	}
}

// wire exports the read API of the process's account (the global account,
// where the streams have always been) to the subscribers' account. It
// runs after the server is made and before it starts.
func (a Access) wire(ns *server.Server) error {
	if !a.needsAccount() {
		return nil
	}
	sub, err := ns.LookupAccount(SubscribersAccount)
	if err != nil {
		return fmt.Errorf("account %s: %w", SubscribersAccount, err)
	}
	proc := ns.GlobalAccount()
	for _, subject := range a.SubscriberPermissions().Publish.Allow {
		resp := server.Singleton
		if strings.HasPrefix(subject, "$JS.API.CONSUMER.MSG.NEXT.") {
			resp = server.Streamed // a pull answers with many messages
		}
		if err := proc.AddServiceExportWithResponse(subject, resp, []*server.Account{sub}); err != nil {
			return fmt.Errorf("export %s: %w", subject, err)
		}
		if err := sub.AddServiceImport(proc, subject, subject); err != nil {
			return fmt.Errorf("import %s: %w", subject, err)
		}
	}
	return nil
}

// enableJetStream turns JetStream on for the process's account once the
// server runs: with a second account configured, nats-server no longer
// enables it for the global account by itself. The streams on disk are
// recovered as they are.
func (a Access) enableJetStream(ns *server.Server) error {
	if !a.needsAccount() {
		return nil
	}
	if err := ns.GlobalAccount().EnableJetStream(nil, nil); err != nil {
		return fmt.Errorf("enable JetStream for the process's account: %w", err)
	}
	return nil
}

// IsLoopback reports whether a listen host reaches only this machine:
// "localhost" or a loopback IP. An empty host or 0.0.0.0 listens on every
// interface, and a host name other than localhost may resolve anywhere.
func IsLoopback(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
