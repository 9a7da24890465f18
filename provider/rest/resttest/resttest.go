// Package resttest serves the REST API over a real embedded JetStream pool
// (handlerstest) on a fake clock, with a scripted history, for the tests of
// the API and of the CLI.
package resttest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/provider/rest"
)

// Token is the admin bearer token of every fixture; ReadToken its
// read-only token.
const (
	Token     = "s3cret-token"
	ReadToken = "r3ad-only-token"
)

// Fixture is a running API over a pool.
type Fixture struct {
	T      testing.TB
	H      *handlerstest.Harness
	Server *httptest.Server
	Client *rest.Client
	// Points are the live views after every step of the history.
	Points []Point
	// Claims names the scripted history's claims by role.
	Claims map[string]string
}

// Point is the live views at one moment of the history.
type Point struct {
	Seq   uint64
	At    time.Time
	Views rest.Replay
}

// Start serves the API over an empty pool.
func Start(t testing.TB) *Fixture {
	t.Helper()
	h := handlerstest.New(t)
	f := &Fixture{T: t, H: h, Claims: map[string]string{}}
	api := rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: Token, ReadToken: ReadToken})
	f.Server = httptest.NewServer(api)
	t.Cleanup(f.Server.Close)
	f.Client = &rest.Client{BaseURL: f.Server.URL, Token: Token}
	return f
}

// Scripted serves the API over the scripted history (History).
func Scripted(t testing.TB) *Fixture {
	t.Helper()
	f := Start(t)
	f.History()
	return f
}

// Record keeps the live views, as the API shows them now, as a point.
func (f *Fixture) Record() {
	f.T.Helper()
	ctx := context.Background()
	gs, err := f.Client.Groups(ctx)
	if err != nil {
		f.T.Fatal(err)
	}
	ss, err := f.Client.Slots(ctx, "")
	if err != nil {
		f.T.Fatal(err)
	}
	cs, err := f.Client.Claims(ctx, "", "", "")
	if err != nil {
		f.T.Fatal(err)
	}
	if gs.Seq != ss.Seq || ss.Seq != cs.Seq {
		f.T.Fatalf("views moved while recording: %d %d %d", gs.Seq, ss.Seq, cs.Seq)
	}
	now := f.H.Clock.Now().UTC()
	f.Points = append(f.Points, Point{Seq: gs.Seq, At: now, Views: rest.Replay{
		Seq: gs.Seq, At: now.Format(time.RFC3339Nano), Groups: gs.Items, Slots: ss.Items, Claims: cs.Items,
	}})
}

// Step moves the clock to Start+d (never back).
func (f *Fixture) Step(d time.Duration) {
	f.T.Helper()
	f.H.StepTo(d)
}

// Do runs a command and records the views after it.
func (f *Fixture) Do(cmd decide.Command) handlers.Result {
	f.T.Helper()
	r := f.H.MustExec(cmd)
	f.Record()
	return r
}

// History writes the harness's scripted history (handlerstest's
// Harness.History), recording the views after each step.
func (f *Fixture) History() {
	f.T.Helper()
	for role, claim := range f.H.History(f.Record) {
		f.Claims[role] = claim
	}
}
