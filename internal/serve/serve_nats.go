package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/claimstream/claimstream/events/natsserver"
)

// natsOptions are the flags of the embedded NATS server's client port and
// of who may use it (docs/operations/reading-the-log.md, NATS access).
type natsOptions struct {
	listen               string
	subscriberUser       string
	subscriberPasswordFN string
	tlsCert              string
	tlsKey               string
	tlsClientCA          string

	// subscriberConsumers bounds the consumers of all subscribers.
	subscriberConsumers int

	// The replica's name, the replica count and the routes to the other
	// replicas (serve_cluster.go).
	natsClusterOptions
}

func (n *natsOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&n.listen, "nats-listen", "", "also open a NATS client port at host:port for read-only subscribers (off by default; TLS required off loopback)")
	f.StringVar(&n.subscriberUser, "nats-subscriber-user", "subscriber", "user name of the read-only NATS subscriber identity")
	f.StringVar(&n.subscriberPasswordFN, "nats-subscriber-password-file", "", "file holding the subscriber's password (or its bcrypt hash), e.g. from a Secret; none: nobody outside the process can connect")
	f.IntVar(&n.subscriberConsumers, "nats-subscriber-max-consumers", natsserver.DefaultSubscriberConsumers, "consumers all NATS subscribers may hold together, in their own account (the process's readers never share this budget)")
	f.StringVar(&n.tlsCert, "nats-tls-cert", "", "NATS client port certificate (PEM file)")
	f.StringVar(&n.tlsKey, "nats-tls-key", "", "NATS client port key (PEM file)")
	f.StringVar(&n.tlsClientCA, "nats-tls-client-ca", "", "CA that NATS clients' certificates must chain to (mTLS)")
	n.addClusterFlags(f)
}

// embeddedConfig turns the flags into the embedded server's config. Bad
// input is refused before anything starts.
func (n *natsOptions) embeddedConfig(dataDir, stream string, noFsync bool, log *slog.Logger) (natsserver.EmbeddedConfig, error) {
	if stream == "" {
		stream = "CLAIMSTREAM" // the store's default
	}
	cluster, err := n.clusterConfig()
	if err != nil {
		return natsserver.EmbeddedConfig{}, err
	}
	ec := natsserver.EmbeddedConfig{
		Dir:        dataDir,
		NoSync:     noFsync,
		Logger:     log,
		ServerName: n.replicaName,
		Cluster:    cluster,
		Access: natsserver.Access{
			Streams:             []string{stream, stream + "_DEADLETTER"},
			SubscriberConsumers: n.subscriberConsumers,
		},
	}
	if n.listen == "" {
		for flag, v := range map[string]string{"--nats-subscriber-password-file": n.subscriberPasswordFN, "--nats-tls-cert": n.tlsCert, "--nats-tls-key": n.tlsKey, "--nats-tls-client-ca": n.tlsClientCA} {
			if v != "" {
				return ec, fmt.Errorf("%s needs --nats-listen: without it there is no NATS client port", flag)
			}
		}
		return ec, nil
	}
	host, portStr, err := net.SplitHostPort(n.listen)
	if err != nil {
		return ec, fmt.Errorf("--nats-listen %q: %w", n.listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return ec, fmt.Errorf("--nats-listen %q: bad port %q", n.listen, portStr)
	}
	if host == "" {
		// An empty host would listen on every interface.
		host = "0.0.0.0"
	}
	tls := natsserver.ListenTLS{CertFile: n.tlsCert, KeyFile: n.tlsKey, ClientCAFile: n.tlsClientCA}
	switch {
	case (n.tlsCert == "") != (n.tlsKey == ""):
		return ec, errors.New("--nats-tls-cert and --nats-tls-key go together")
	case n.tlsClientCA != "" && n.tlsCert == "":
		return ec, errors.New("--nats-tls-client-ca needs --nats-tls-cert and --nats-tls-key")
	case n.tlsCert == "" && !natsserver.IsLoopback(host):
		return ec, fmt.Errorf("--nats-listen %s is not a loopback address: the NATS client port needs TLS there (--nats-tls-cert and --nats-tls-key), or bind it to 127.0.0.1", n.listen)
	}
	// In flag order (not a map's): the first missing file is the one named.
	for _, f := range []struct{ flag, path string }{{"--nats-tls-cert", n.tlsCert}, {"--nats-tls-key", n.tlsKey}, {"--nats-tls-client-ca", n.tlsClientCA}} {
		flag, path := f.flag, f.path
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err != nil {
			return ec, fmt.Errorf("%s: %w", flag, err)
		}
	}
	if n.subscriberPasswordFN != "" {
		b, err := os.ReadFile(n.subscriberPasswordFN)
		if err != nil {
			return ec, fmt.Errorf("--nats-subscriber-password-file: %w", err)
		}
		// A Secret's file often ends with a newline; the password does not.
		pw := strings.TrimRight(string(b), "\r\n")
		if strings.TrimSpace(pw) == "" {
			return ec, fmt.Errorf("--nats-subscriber-password-file %s is empty", n.subscriberPasswordFN)
		}
		ec.Access.Subscribers = []natsserver.Subscriber{{User: n.subscriberUser, Password: pw}}
		if err := ec.Access.Validate(); err != nil {
			return ec, fmt.Errorf("--nats-subscriber-user: %w", err)
		}
	} else {
		log.Warn("NATS client port has no subscriber identity: nobody outside the process can connect (set --nats-subscriber-password-file)", "address", n.listen)
	}
	ec.Listen, ec.Host, ec.Port, ec.TLS = true, host, port, tls
	return ec, nil
}

// logListening says where the client port is and who may use it.
func (n *natsOptions) logListening(log *slog.Logger, emb *natsserver.Embedded) {
	if n.listen == "" {
		return
	}
	user := ""
	if n.subscriberPasswordFN != "" {
		user = n.subscriberUser
	}
	log.Info("NATS client port listening", "url", emb.ClientURL(), "tls", n.tlsCert != "", "mtls", n.tlsClientCA != "", "subscriber", user)
}
