package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/internal/logcapture"
	"github.com/claimstream/claimstream/provider/rest"
)

// TestEventsFollowResumesAcrossAServerRestart: `events --follow` against a
// real serve on a data dir; serve stops and starts again on the same dir
// and address. The follower says the server is gone and where it resumes,
// resumes, and prints every event once: no sequence twice, none skipped,
// the events written after the restart included.
func TestEventsFollowResumesAcrossAServerRestart(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions{
		config: filepath.Join("..", "..", "deploy", "examples", "pool.yaml"), configPoll: time.Hour, dataDir: dir, stream: "CLAIMSTREAM", noFsync: true,
		apiAddress: freeAddr(t), apiToken: "follow-token-0123456789abcdef0123456", logLevel: "error", logFormat: "text", cluster: clusterOptions{namespace: "claimstream"},
	}
	client := &rest.Client{BaseURL: "http://" + o.apiAddress, Token: o.apiToken}
	serve := func() func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runServe(ctx, o) }()
		eventstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
			l, err := client.Slots(context.Background(), "")
			if err == nil && len(l.Items) == 0 {
				err = errors.New("the pool file is not applied yet")
			}
			return err
		})
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
		t.Cleanup(stop)
		return stop
	}
	stop := serve()

	var stdout, stderr logcapture.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	root := NewRoot()
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"events", "--follow", "-o", "json", "--server", client.BaseURL, "--token", o.apiToken, "--cli-config", ""})
	followed := make(chan error, 1)
	go func() { followed <- root.ExecuteContext(ctx) }()
	defer func() { cancel(); <-followed }()

	lastSeq := func() uint64 {
		l, err := client.Groups(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return l.Seq
	}
	printed := func(want uint64) func() error {
		return func() error {
			if n := uint64(strings.Count(stdout.String(), "\n")); n < want {
				return fmt.Errorf("%d events printed, want %d", n, want)
			}
			return nil
		}
	}
	before := lastSeq()
	eventstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, printed(before))

	stop()
	eventstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, func() error {
		if !strings.Contains(stderr.String(), "server gone") {
			return errors.New("no 'server gone' line yet: " + stderr.String())
		}
		return nil
	})
	// Where the follower stood when the server went away.
	before = uint64(strings.Count(stdout.String(), "\n"))
	serve()
	bctx, bcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer bcancel()
	// Reads answer before the restarted replica has taken its lease back;
	// writes are refused as Unavailable until then.
	eventstest.CheckFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		_, err := client.ManualClaim(bctx, "node-1.lan", rest.CommandRequest{By: "carol", Reason: "after the restart"})
		if err != nil && !strings.Contains(err.Error(), "not the leader") {
			t.Fatal(err)
		}
		return err
	})
	after := lastSeq()
	if after <= before {
		t.Fatalf("nothing written after the restart (log at %d, before %d)", after, before)
	}
	eventstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, printed(after))

	// Every sequence from 1 to the end, once, in order.
	seqs := regexp.MustCompile(`"sequence":"([0-9]+)"`).FindAllStringSubmatch(stdout.String(), -1)
	for i, m := range seqs {
		if n, _ := strconv.ParseUint(m[1], 10, 64); n != uint64(i+1) {
			t.Fatalf("event %d printed has sequence %d, want %d (a duplicate or a gap):\n%s", i+1, n, i+1, stdout.String())
		}
	}
	// The simulator may have written more since: at least the log's end
	// as read after the claim.
	if uint64(len(seqs)) < after {
		t.Fatalf("%d events printed, the log holds %d", len(seqs), after)
	}
	if !strings.Contains(stdout.String(), "after the restart") {
		t.Fatal("the claim made after the restart was not printed")
	}
	want := fmt.Sprintf(`server gone \(.*\), reconnecting from seq %d\n`, before+1)
	if !regexp.MustCompile(want).MatchString(stderr.String()) || !strings.Contains(stderr.String(), fmt.Sprintf("resumed at seq %d", before+1)) {
		t.Fatalf("stderr does not say %q and resumed at seq %d:\n%s", want, before+1, stderr.String())
	}
}
