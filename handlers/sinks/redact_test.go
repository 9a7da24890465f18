package sinks_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/claimstream/claimstream/handlers/sinks"
)

func TestRedactURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://u:p@hooks.example.com/x/y?token=abc&api_key=k#f", "https://hooks.example.com/x/y"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://u@h?sig=1", "http://h"},
		{"https://a@b@h:1/p@q", "https://h:1/p@q"},
		{"http://h/p?x=a@b/c", "http://h/p"},
		{"not a url?secret", "not a url"},
	} {
		if got := sinks.RedactURL(c.in); got != c.want {
			t.Errorf("RedactURL(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// An error's text loses every URL's credentials, in whatever form net/http
// printed it; errors.Is still sees what it wrapped.
func TestRedactError(t *testing.T) {
	inner := &url.Error{Op: "Post", URL: "https://user:***@h/x?token=t0k", Err: errors.New("EOF")}
	err := sinks.RedactError(fmt.Errorf("sink a: %w", inner))
	if got, want := err.Error(), `sink a: Post "https://h/x": EOF`; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
	if !errors.Is(err, inner) {
		t.Fatal("errors.Is lost the wrapped error")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		t.Fatal("the original (with the URL) can be unwrapped")
	}
	if sinks.RedactError(nil) != nil {
		t.Fatal("nil")
	}
}

// A sinks file's URL problems do not show the URL's credentials.
func TestSinksFileURLProblemsHideCredentials(t *testing.T) {
	for _, u := range []string{"ftp://u:s3cret@x/?token=t0ken", "http://u:s3cret@x:port/?token=t0ken", "http://u:s3cret@/?token=t0ken"} {
		_, err := sinks.ParseConfig([]byte("sinks: [{name: a, url: '" + u + "'}]"))
		if err == nil || !strings.Contains(err.Error(), "sinks[0].url") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "t0ken") {
			t.Errorf("%s: %v; want a url problem without the credentials", u, err)
		}
	}
}

// FuzzRedactURL: whatever the text, what RedactURL leaves has no
// userinfo, query or fragment, and keeps the host url.Parse finds.
func FuzzRedactURL(f *testing.F) {
	f.Add("https://u:p@h/x?token=abc#f")
	f.Add("http://h")
	f.Add("a://b@c@d/e?f#g")
	f.Fuzz(func(t *testing.T, s string) {
		out := sinks.RedactURL(s)
		if strings.ContainsAny(out, "?#") {
			t.Fatalf("RedactURL(%q) = %q keeps a query or fragment", s, out)
		}
		if u, err := url.Parse(out); err == nil && u.User != nil {
			t.Fatalf("RedactURL(%q) = %q keeps userinfo", s, out)
		}
		// Where url.Parse reads a host, RedactURL keeps that host.
		if u, err := url.Parse(s); err == nil && u.Host != "" {
			if r, err := url.Parse(out); err != nil || r.Host != u.Host {
				t.Fatalf("RedactURL(%q) = %q, url.Parse finds host %q", s, out, u.Host)
			}
		}
	})
}
