package natsserver

import (
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/claimstream/claimstream/events/eventlog"
)

// Access says who may use the embedded server, through nats-server's own
// authorization and accounts. Two kinds of identity exist:
//
//   - the process: nkey users generated at every start, their seeds held
//     only in memory, allowed on in-process connections only. One, in the
//     process's account (the global account, where the log is), is the only
//     writer and JetStream administrator; the other administers the
//     subscribers' copies of the streams in SubscribersAccount.
//   - subscribers: user/password identities allowed on the client port
//     (standard connections only), in SubscribersAccount, with permissions
//     for reading alone.
//
// Subscribers never touch the process's streams. Their account has a
// JetStream of its own, bounded by account limits, holding a mirror of each
// of Streams under the same name: every consumer a subscriber makes lives
// there, counts against that account's limit, and delivers in that
// account, where no consumer of the process listens. The only way from
// their account into the process's is what the mirrors need: the create
// request of a mirror's consumer and its flow-control replies, imported by
// wildcards, which no push consumer delivers to (see wire). A subscriber's
// push consumer delivering anywhere but its inboxes is removed
// (subscriber_guard.go).
//
// Nobody connects without a credential: with no Subscribers, the client
// port, if open, lets no one in.
type Access struct {
	// Subscribers are the read-only identities of the client port.
	Subscribers []Subscriber
	// Streams are the streams subscribers may read, each through its copy
	// in SubscribersAccount: stream info, message get and direct get, and
	// consumers of their own (create, info, list, fetch, ack, delete).
	Streams []string
	// SubscriberConsumers bounds the consumers of all subscribers together
	// (default DefaultSubscriberConsumers).
	SubscriberConsumers int

	// clustered: the server is one of several. Accounts are cluster-wide
	// and must be the same on every replica, so the subscribers' account
	// is defined even where no subscriber is.
	clustered bool
	// listening: the client port is open. The subscribers' account is
	// then always defined: nats-server lets anonymous clients into the
	// global account when the only accounts are it and a configured
	// system account (configureAuthWatch's).
	listening bool
}

// DefaultSubscriberConsumers is the subscribers' consumer limit unless
// --nats-subscriber-max-consumers says otherwise.
const DefaultSubscriberConsumers = 100

// Subjects by which a mirror in SubscribersAccount reaches the stream it
// copies: its consumer create requests go to subscriberCopyAPI (imported
// from the process's $JS.API), its flow-control replies to $JS.FC.<stream>.>
// (imported as they are), its messages arrive on
// subscriberCopyDeliver.<stream>.> (exported by the process's account).
const (
	subscriberCopyAPI     = "$JS.CS.API"
	subscriberCopyDeliver = "$JS.CS.DELIVER"
	flowControlReplies    = "$JS.FC.>"
)

// needsAccount: the subscribers' account is defined on this server.
func (a Access) needsAccount() bool { return len(a.Subscribers) > 0 || a.clustered || a.listening }

func (a Access) subscriberConsumers() int {
	if a.SubscriberConsumers > 0 {
		return a.SubscriberConsumers
	}
	return DefaultSubscriberConsumers
}

// Subscriber is one read-only identity. Password may be a bcrypt hash
// ("$2a$..."), which nats-server compares as such.
type Subscriber struct {
	User     string
	Password string
}

// ProcessInboxPrefix is the inbox prefix of the process's own connection.
// Subscribers, besides living in another account, may subscribe to
// _INBOX.> (their own replies) only, never here.
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
		if !eventlog.ValidToken(st) {
			return fmt.Errorf("stream name %q is not one subject token", st)
		}
	}
	if a.SubscriberConsumers < 0 {
		return fmt.Errorf("subscriber consumer limit %d is negative", a.SubscriberConsumers)
	}
	return nil
}

// SubscriberPermissions are the read-only permissions of a subscriber: the
// JetStream API subjects needed to read the copies of Streams and to run
// consumers of one's own on them, and nothing else. What is not allowed is
// refused by the server: publishing to event subjects, stream create,
// update, delete and purge, message delete, snapshot and restore, consumer
// pause and reset, and the subjects by which the copies reach the
// process's account.
func (a Access) SubscriberPermissions() *server.Permissions {
	pub := []string{
		"$JS.API.INFO",
		"$JS.API.STREAM.NAMES",
		"$JS.API.STREAM.LIST",
	}
	for _, st := range a.Streams {
		pub = append(pub,
			"$JS.API.STREAM.INFO."+st,
			"$JS.API.STREAM.MSG.GET."+st,
			"$JS.API.DIRECT.GET."+st,
			"$JS.API.DIRECT.GET."+st+".>",
			"$JS.API.CONSUMER.CREATE."+st,
			"$JS.API.CONSUMER.CREATE."+st+".>",
			"$JS.API.CONSUMER.DURABLE.CREATE."+st+".*",
			"$JS.API.CONSUMER.INFO."+st+".*",
			"$JS.API.CONSUMER.NAMES."+st,
			"$JS.API.CONSUMER.LIST."+st,
			"$JS.API.CONSUMER.DELETE."+st+".*",
			"$JS.API.CONSUMER.MSG.NEXT."+st+".*",
			// Acks are replies to these subjects.
			"$JS.ACK."+st+".>",
		)
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: pub, Deny: []string{
			subscriberCopyAPI + ".>", subscriberCopyDeliver + ".>", flowControlReplies,
		}},
		Subscribe: &server.SubjectPermission{Allow: []string{subscriberInboxes}},
	}
}

// processIdentity is one of the process's own credentials: a fresh nkey
// pair. The server keeps only the public key; the seed never leaves this
// memory.
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

// SubscribersAccount is the NATS account of the subscriber identities and
// of the copies of the streams they read.
const SubscribersAccount = "SUBSCRIBERS"

// configure puts the identities into the server's options: proc in the
// process's account, copier (when the subscribers' account is defined) in
// the subscribers' account.
func (a Access) configure(opts *server.Options, proc, copier *processIdentity) error {
	inProcess := map[string]struct{}{jwt.ConnectionTypeInProcess: {}}
	opts.Nkeys = []*server.NkeyUser{{
		Nkey: proc.pub,
		// No permissions: everything. In-process only: the key is
		// useless on the client port even if it leaked.
		AllowedConnectionTypes: inProcess,
	}}
	opts.Users, opts.Accounts = nil, nil
	if !a.needsAccount() {
		return nil
	}
	// With a second account, the server turns JetStream on only for the
	// accounts whose configuration asks for it.
	global, err := jetStreamAccount(server.DEFAULT_GLOBAL_ACCOUNT, "enabled")
	if err != nil {
		return err
	}
	acc, err := jetStreamAccount(SubscribersAccount, fmt.Sprintf(
		"{max_mem: 0, max_file: -1, max_streams: %d, max_consumers: %d, max_ack_pending: 0, mem_max_stream_bytes: 0, store_max_stream_bytes: 0}",
		len(a.Streams), a.subscriberConsumers()))
	if err != nil {
		return err
	}
	opts.Accounts = []*server.Account{global, acc}
	opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: copier.pub, Account: acc, AllowedConnectionTypes: inProcess})
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
	return nil
}

// jetStreamAccount is an account named name whose JetStream the server
// turns on as it starts, with limits written as the server's account
// configuration writes them ("enabled", or a map of limits). The server
// takes an account's JetStream limits before its start from its
// configuration only; turned on after the start, a clustered replica's
// meta layer could first apply the assignment of one of the account's
// streams, fail to make its copy ("JetStream not enabled for account"),
// and leave that stream a replica short until the assignment changes.
func jetStreamAccount(name, limits string) (*server.Account, error) {
	var o server.Options
	if err := o.ProcessConfigString("accounts: { account: { jetstream: " + limits + " } }"); err != nil {
		return nil, fmt.Errorf("account %s: JetStream limits %s: %w", name, limits, err)
	}
	if len(o.Accounts) != 1 {
		return nil, fmt.Errorf("account %s: JetStream limits %s: %d accounts parsed", name, limits, len(o.Accounts))
	}
	// The server copies a configured account's settings into the account
	// of its name, the global one included.
	acc := o.Accounts[0]
	acc.Name = name
	return acc, nil
}

// wire connects the copies in the subscribers' account to the streams of
// the process's account (the global account, where the streams have always
// been): a mirror's consumer create request, its flow-control replies, and
// its deliveries. It runs after the server is made and before it starts.
func (a Access) wire(ns *server.Server) error {
	if !a.needsAccount() {
		return nil
	}
	sub, err := ns.LookupAccount(SubscribersAccount)
	if err != nil {
		return fmt.Errorf("account %s: %w", SubscribersAccount, err)
	}
	proc := ns.GlobalAccount()
	only := []*server.Account{sub}
	service := func(local, remote string) error {
		if err := proc.AddServiceExportWithResponse(remote, server.Singleton, only); err != nil {
			return fmt.Errorf("export %s: %w", remote, err)
		}
		if err := sub.AddServiceImport(proc, local, remote); err != nil {
			return fmt.Errorf("import %s: %w", remote, err)
		}
		return nil
	}
	// A mirror without a filter creates its consumer with the request
	// form that names the stream only. Imported by a wildcard: nats-server
	// starts a push consumer's deliveries only for a subscription on
	// exactly its deliver subject, so a subscriber's push consumer aimed
	// here never delivers (as for the flow-control replies below).
	if err := service(subscriberCopyAPI+".CONSUMER.CREATE.*", "$JS.API.CONSUMER.CREATE.*"); err != nil {
		return err
	}
	for _, st := range a.Streams {
		deliver := subscriberCopyDeliver + "." + st + ".>"
		if err := proc.AddStreamExport(deliver, only); err != nil {
			return fmt.Errorf("export %s: %w", deliver, err)
		}
		if err := sub.AddStreamImport(proc, deliver, ""); err != nil {
			return fmt.Errorf("import %s: %w", deliver, err)
		}
		// Flow-control replies of this stream's consumers only: those of
		// the process's other push consumers (a bucket's watchers) stay
		// out of reach.
		fc := "$JS.FC." + st + ".>"
		if err := service(fc, fc); err != nil {
			return err
		}
	}
	return nil
}

// checkJetStream reports an account the server started without
// JetStream: a start that would otherwise fail every request with
// "JetStream not enabled for account".
func (a Access) checkJetStream(ns *server.Server) error {
	if !a.needsAccount() {
		return nil
	}
	if !ns.GlobalAccount().JetStreamEnabled() {
		return errors.New("JetStream is not on for the process's account")
	}
	sub, err := ns.LookupAccount(SubscribersAccount)
	if err != nil {
		return fmt.Errorf("account %s: %w", SubscribersAccount, err)
	}
	if !sub.JetStreamEnabled() {
		return errors.New("JetStream is not on for the subscribers' account")
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
