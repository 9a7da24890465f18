package sinks

import (
	"errors"
	"regexp"
	"strings"
)

// RedactURL is raw as it may be shown, logged or stored:
// scheme://host/path, without the userinfo (user:pass@), the query and
// the fragment, where webhook credentials are put. It never fails: a text
// that is not a URL loses the same parts by the same rules as url.Parse
// finds them (the query and fragment at the first '?' or '#', the userinfo
// up to the last '@' before the path).
func RedactURL(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	prefix, rest := "", raw
	if scheme, after, ok := strings.Cut(raw, "://"); ok && isScheme(scheme) {
		prefix, rest = scheme+"://", after
	} else if after, ok := strings.CutPrefix(raw, "//"); ok {
		prefix, rest = "//", after
	}
	if prefix == "" {
		return rest // no authority, so no userinfo
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	return prefix + authority + path
}

// isScheme reports whether s is a URL scheme: a letter, then letters,
// digits, '+', '-' or '.' (RFC 3986).
func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// urlInText is a URL as errors print one: net/http's *url.Error quotes it,
// with the password replaced by *** but the user and the query kept.
var urlInText = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// RedactText is s with every URL in it redacted (RedactURL).
func RedactText(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, RedactURL)
}

// RedactError is err with every URL in its text redacted; nil stays nil.
// errors.Is still sees what err wraps (context.DeadlineExceeded), but the
// original is not unwrapped, so no caller can print its text.
func RedactError(err error) error {
	if err == nil {
		return nil
	}
	if _, done := err.(*redactedError); done {
		return err
	}
	return &redactedError{msg: RedactText(err.Error()), err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }

// Is matches what the original error matches.
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }
