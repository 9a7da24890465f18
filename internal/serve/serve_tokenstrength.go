package serve

import (
	"fmt"
	"os"
	"unicode/utf8"
)

// minAPITokenLength is the shortest API token serve takes from its flags,
// variables or files: 32 hexadecimal characters are 128 bits. The
// failed-authentication throttle lets the right token through whatever
// the address's budget, so that no guesser locks out the others behind
// its NAT; the token's length is what keeps a guesser from finding it.
const minAPITokenLength = 32

// strongToken is token, or an error for one shorter than
// minAPITokenLength that names where it came from (source) and how to
// make a good one.
func strongToken(source, token string) (string, error) {
	if n := utf8.RuneCountInString(token); n < minAPITokenLength {
		return "", fmt.Errorf("%s is %d characters long, fewer than the %d an API token needs to resist guessing: generate one with `openssl rand -hex 32`", source, n, minAPITokenLength)
	}
	return token, nil
}

// checkGivenTokens refuses, before the data dir is touched, the tokens
// given by flag, variable or file that the API would refuse (apiToken,
// readTokenFlags.resolve); a token generated in the data dir is strong.
func checkGivenTokens(o serveOptions) error {
	if o.apiAddress == "" {
		return nil
	}
	admin := ""
	if o.apiToken != "" || os.Getenv("CLAIMSTREAM_API_TOKEN") != "" || o.apiTokenFile != "" {
		var err error
		if admin, err = apiToken(o); err != nil {
			return err
		}
	}
	_, err := o.apiReadToken.resolve(admin)
	return err
}
