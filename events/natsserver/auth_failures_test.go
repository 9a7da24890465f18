package natsserver_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/events/natsserver"
	"github.com/claimstream/claimstream/internal/logcapture"
)

// Guessing the subscriber's password is seen: every refused login is
// counted, and the log gets a line for the first of a spell, not one per
// guess.
func TestRefusedLoginsAreCountedAndLoggedOnce(t *testing.T) {
	logs, log := logcapture.New(slog.LevelInfo)
	emb, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{
		Dir: t.TempDir(), NoSync: true, Listen: true, Host: "127.0.0.1", Port: -1, Logger: log,
		Access: natsserver.Access{Subscribers: []natsserver.Subscriber{{User: readerUser, Password: readerPassword}}, Streams: []string{"CLAIMSTREAM"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emb.Shutdown)
	const guesses = 40
	for i := range guesses {
		// A connect that times out before the server reads its
		// credentials is no refused login: give each the time to reach
		// them on a loaded machine.
		nc, err := nats.Connect(emb.ClientURL(), nats.UserInfo(readerUser, fmt.Sprint("guess-", i)), nats.NoReconnect(), nats.Timeout(30*time.Second))
		if err == nil {
			nc.Close()
			t.Fatalf("guess %d logged in", i)
		}
		if !errors.Is(err, nats.ErrAuthorization) {
			t.Fatalf("guess %d: %v, want an authorization violation", i, err)
		}
	}
	eventstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if n := emb.AuthFailures.Total(); n != guesses {
			return fmt.Errorf("%d refused logins counted, want %d", n, guesses)
		}
		return nil
	})
	lines := logs.Lines("NATS login refused on the client port")
	if len(lines) != 1 {
		t.Fatalf("%d log lines for %d guesses, want 1:\n%s", len(lines), guesses, logs)
	}
	for _, want := range []string{"address=127.0.0.1", "user=" + readerUser} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the line %q does not say %s", lines[0], want)
		}
	}
	// The right password still gets in.
	nc, err := nats.Connect(emb.ClientURL(), nats.UserInfo(readerUser, readerPassword), nats.NoReconnect())
	if err != nil {
		t.Fatalf("the subscriber after the guesses: %v", err)
	}
	nc.Close()
}
