package serve

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// readTokenFlags name the REST API's read-only token: it reads everything
// the API serves but the backup, and changes nothing (rest.AdminRoutes).
type readTokenFlags struct {
	token, file string
}

func (r *readTokenFlags) register(f *pflag.FlagSet) {
	f.StringVar(&r.token, "api-read-token", "", "read-only bearer token of the REST API and the dashboard (env CLAIMSTREAM_API_READ_TOKEN): it reads, and every write and the backup answer it 403; default: read --api-read-token-file, else none")
	f.StringVar(&r.file, "api-read-token-file", "", "file holding the read-only API token")
}

// resolve is the read-only token ("" for none): --api-read-token,
// $CLAIMSTREAM_API_READ_TOKEN, or --api-read-token-file. It must differ
// from the admin token (one string cannot be both) and be at least
// minAPITokenLength long.
func (r *readTokenFlags) resolve(admin string) (string, error) {
	t, source := r.token, "--api-read-token"
	if t == "" {
		t, source = os.Getenv("CLAIMSTREAM_API_READ_TOKEN"), "$CLAIMSTREAM_API_READ_TOKEN"
	}
	if t == "" && r.file != "" {
		b, err := os.ReadFile(r.file)
		if err != nil {
			return "", fmt.Errorf("--api-read-token-file: %w", err)
		}
		if t = strings.TrimSpace(string(b)); t == "" {
			return "", fmt.Errorf("--api-read-token-file %s is empty: write the read-only token in it, or drop the flag", r.file)
		}
		source = "the read-only API token in " + r.file
	}
	if t == "" {
		return "", nil
	}
	if t == admin {
		return "", errors.New("the read-only API token (--api-read-token) is the admin token (--api-token): give it a token of its own")
	}
	return strongToken(source, t)
}
