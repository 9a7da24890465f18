package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tokenHint is what a 401 adds: which of the places the CLI looks for the
// API token gave the one refused, the lookup order, and how to pass one.
func (o *cliOptions) tokenHint(file cliFile, local string) string {
	cfg := o.configFile
	if cfg == "" {
		cfg = "(no CLI config file: --cli-config \"\")"
	}
	localFile := filepath.Join(defaultDataDir(), apiTokenFile)
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
	fmt.Fprintf(&b, "    4. %s, for a server on this machine's loopback\n", localFile)
	fmt.Fprintf(&b, "  serve's token is in <data-dir>/%s (or its --api-token / --api-token-file); pass it with\n", apiTokenFile)
	fmt.Fprintf(&b, "  --token \"$(cat <data-dir>/%s)\" or export CLAIMSTREAM_TOKEN=...", apiTokenFile)
	return b.String()
}
