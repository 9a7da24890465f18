package cli

import (
	"fmt"
	"os"
	"strings"
)

// tokenHint is what a 401 adds: which of the places the CLI looks for the
// API token gave the one refused, the lookup order, and how to pass one.
func (o *Options) tokenHint(file cliFile, local string) string {
	cfg := o.configFile
	if cfg == "" {
		cfg = "(no CLI config file: --cli-config \"\")"
	}
	localFile := localTokenFile()
	used := "no token was found"
	switch {
	case o.token != "":
		used = "the token came from --token"
	case os.Getenv("CLAIMSTREAM_TOKEN") != "":
		used = "the token came from $CLAIMSTREAM_TOKEN"
	case file.Token != "":
		used = "the token came from `token:` in " + cfg
	case local != "":
		used = "the token came from " + localFile + " (a local serve's default data dir)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  %s; the CLI looks for it in this order:\n", used)
	fmt.Fprintf(&b, "    1. --token TOKEN\n")
	fmt.Fprintf(&b, "    2. the environment variable CLAIMSTREAM_TOKEN\n")
	fmt.Fprintf(&b, "    3. `token:` in the CLI config file %s\n", cfg)
	if localFile != "" {
		fmt.Fprintf(&b, "    4. %s, for a server on this machine's loopback\n", localFile)
	}
	name := first(Local.TokenFile, "api-token")
	fmt.Fprintf(&b, "  serve's token is in <data-dir>/%s (or its --api-token / --api-token-file); pass it with\n", name)
	fmt.Fprintf(&b, "  --token \"$(cat <data-dir>/%s)\" or export CLAIMSTREAM_TOKEN=...", name)
	return b.String()
}
