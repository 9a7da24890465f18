package cli

import (
	"os"
	"path/filepath"

	"github.com/claimstream/claimstream/provider/rest"
)

// The CLI is linked into two binaries: claimstream (beside serve) and the
// kubectl plugin. These are what each tells it of where it runs.

// Local is the serve of this machine: the claimstream binary sets where
// its default data dir keeps the API token, for a CLI with no
// configuration. The kubectl plugin, which talks to a cluster, leaves it
// unset and the CLI looks for no local token.
var Local struct {
	DataDir   func() string
	TokenFile string
}

// Discover, when set, finds the API when neither --server nor
// CLAIMSTREAM_SERVER names one: the kubectl plugin finds the Service and
// its token in the cluster. It is called once a command needs the API.
var Discover func() (*rest.Client, error)

// localTokenFile is the path of a local serve's token, or "" when the
// binary has no local serve.
func localTokenFile() string {
	if Local.DataDir == nil || Local.TokenFile == "" {
		return ""
	}
	return filepath.Join(Local.DataDir(), Local.TokenFile)
}

// discovered is the API Discover finds, with --token (or CLAIMSTREAM_TOKEN)
// over the token it found.
func (o *Options) discovered() (*rest.Client, error) {
	c, err := Discover()
	if err != nil {
		return nil, err
	}
	if t := first(o.token, os.Getenv("CLAIMSTREAM_TOKEN")); t != "" {
		c.Token = t
	}
	return c, nil
}
