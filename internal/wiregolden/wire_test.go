// Package wiregolden_test holds the test that the event log's format and
// the answers of the REST API and the cluster-autoscaler provider stay
// byte-identical: a data dir written by an earlier build (testdata/datadir,
// the example story played on the example pool) is opened by this one, every
// stored message is decoded and encoded again to the same bytes, and the
// answers to a fixed set of reads are compared with golden files.
package wiregolden_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/events/eventlog"
	"github.com/claimstream/claimstream/events/eventstest"
	"github.com/claimstream/claimstream/handlers/handlerstest"
	"github.com/claimstream/claimstream/handlers/pool"
	"github.com/claimstream/claimstream/handlers/sim"
	"github.com/claimstream/claimstream/internal/golden"
	"github.com/claimstream/claimstream/projections"
	"github.com/claimstream/claimstream/projections/cost"
	"github.com/claimstream/claimstream/projections/timeline"
	"github.com/claimstream/claimstream/provider"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
	"github.com/claimstream/claimstream/provider/rest"
)

var updateDataDir = flag.Bool("update-datadir", false, "play the example story again into testdata/datadir (then run with -update)")

const rerun = "go test ./internal/wiregolden -update"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestStoredLogAndAnswersAreByteIdentical(t *testing.T) {
	if *updateDataDir {
		writeDataDir(t, filepath.Join("testdata", "datadir"))
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "datadir"))); err != nil {
		t.Fatal(err)
	}
	srv := eventstest.StartServerOn(t, dir)
	h := handlerstest.OnServer(t, srv, eventlog.StoreConfig{})
	var last time.Time
	t.Run("log", func(t *testing.T) { last = checkLog(t, srv) })
	// Reads answer at a fixed instant after the story's last event.
	h.Clock.SetTime(last.Add(time.Hour))
	t.Run("rest", func(t *testing.T) { checkREST(t, h) })
	t.Run("grpc", func(t *testing.T) { checkGRPC(t, h) })
}

// checkLog decodes every stored message and encodes it again: the same
// subject, headers and data, byte for byte. The list of what the log
// holds is golden. It returns the time of the newest event.
func checkLog(t *testing.T, srv *eventstest.Server) time.Time {
	ctx := context.Background()
	js, err := jetstream.New(srv.Conn)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "CLAIMSTREAM")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	subjects := events.Subjects{Prefix: info.Config.Subjects[0][:strings.Index(info.Config.Subjects[0], ".")]}
	var list strings.Builder
	var last time.Time
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("seq %d: %v", seq, err)
		}
		e := events.FromMsg(subjects, m.Subject, m.Sequence, m.Header, m.Data)
		if e.Err != nil {
			t.Fatalf("seq %d: %v", seq, e.Err)
		}
		again, err := eventlog.ToMsg(e, m.Subject)
		if err != nil {
			t.Fatalf("seq %d: encode: %v", seq, err)
		}
		if !bytes.Equal(again.Data, m.Data) {
			t.Errorf("seq %d %s: data encoded again differs:\n got %s\nwant %s", seq, e.Type, again.Data, m.Data)
		}
		if g, w := headerLines(again.Header), headerLines(m.Header); g != w {
			t.Errorf("seq %d %s: headers encoded again differ:\n got %s\nwant %s", seq, e.Type, g, w)
		}
		fmt.Fprintf(&list, "%d %s %s %s\n", seq, m.Subject, e.Type, e.Time.UTC().Format(time.RFC3339Nano))
		last = e.Time
	}
	golden.Check(t, filepath.Join("testdata", "log.txt"), list.String(), rerun)
	return last
}

// headerLines are the envelope's headers, one per line, sorted; the
// server's own (Nats-*: the stream, the sequence, the publish's
// expectations) are the store's, not the envelope's.
func headerLines(h map[string][]string) string {
	var lines []string
	for k, vs := range h {
		if strings.HasPrefix(k, "Nats-") {
			continue
		}
		for _, v := range vs {
			lines = append(lines, k+": "+v)
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// checkREST reads the API as serve wires it (the cost and timeline
// indexes built) and compares each answer's status, type and body.
func checkREST(t *testing.T, h *handlerstest.Harness) {
	ctx := context.Background()
	timelines, err := timeline.NewIndex(ctx, h.Views, h.Store, "")
	if err != nil {
		t.Fatal(err)
	}
	costs, err := cost.NewRunner(ctx, h.Views, h.Store, "")
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(rest.New(h.Views, h.Service, h.Store, h.Clock, rest.Options{Token: "t", Timeline: timelines, Cost: costs, Logger: quiet}))
	defer api.Close()

	var first, lastClaim string
	h.Read(func(s *projections.State) {
		names := make([]string, 0, len(s.Claims))
		for n := range s.Claims {
			names = append(names, n)
		}
		slices.Sort(names)
		first, lastClaim = names[0], names[len(names)-1]
	})
	now := h.Clock.Now()
	window := url.Values{"since": {now.Add(-3 * time.Hour).Format(time.RFC3339)}, "until": {now.Format(time.RFC3339)}}.Encode()
	paths := []string{
		"/api/v1/groups", "/api/v1/groups/homelab",
		"/api/v1/slots", "/api/v1/slots/node-1.lan",
		"/api/v1/claims", "/api/v1/claims/" + first, "/api/v1/claims/" + lastClaim,
		"/api/v1/events", "/api/v1/events?type=ClaimCreated,ClaimFailed&last=5",
		"/api/v1/events/export?" + window,
		"/api/v1/timeline?" + window,
		"/api/v1/audit/slots/node-1.lan", "/api/v1/audit/claims/" + first,
		"/api/v1/replay?seq=40",
		"/api/v1/cost?" + window + "&by=slot", "/api/v1/cost?" + window + "&by=group",
		"/schemas/events/ClaimCreated.v1.json",
		"/api/v1/groups/nope",
	}
	var out strings.Builder
	for _, p := range paths {
		var status int
		var ctype string
		var body []byte
		// The cost index answers 503 while it builds.
		eventstest.CheckFor(t, time.Minute, 10*time.Millisecond, func() error {
			req, _ := http.NewRequest(http.MethodGet, api.URL+p, nil)
			req.Header.Set("Authorization", "Bearer t")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			status, ctype = resp.StatusCode, resp.Header.Get("Content-Type")
			body, err = io.ReadAll(resp.Body)
			if err != nil {
				return err
			}
			if status == http.StatusServiceUnavailable {
				return fmt.Errorf("%s: %d %s", p, status, body)
			}
			return nil
		})
		fmt.Fprintf(&out, "== GET %s\n%d %s\n%s\n", p, status, ctype, strings.TrimRight(string(body), "\n"))
	}
	golden.Check(t, filepath.Join("testdata", "rest.txt"), out.String(), rerun)
}

// checkGRPC asks the provider what cluster-autoscaler asks and compares
// each answer's deterministic protobuf encoding.
func checkGRPC(t *testing.T, h *handlerstest.Harness) {
	ctx := context.Background()
	s := provider.New(h.Views, h.Service, h.Clock, provider.Options{Logger: quiet})
	node := &pb.ExternalGrpcNode{Name: "node-1.lan", ProviderID: "homelab://node-1.lan"}
	now := h.Clock.Now()
	calls := []struct {
		name string
		call func() (proto.Message, error)
	}{
		{"NodeGroups", func() (proto.Message, error) { return s.NodeGroups(ctx, &pb.NodeGroupsRequest{}) }},
		{"NodeGroupForNode", func() (proto.Message, error) {
			return s.NodeGroupForNode(ctx, &pb.NodeGroupForNodeRequest{Node: node})
		}},
		{"NodeGroupTargetSize", func() (proto.Message, error) {
			return s.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "homelab"})
		}},
		{"NodeGroupNodes", func() (proto.Message, error) { return s.NodeGroupNodes(ctx, &pb.NodeGroupNodesRequest{Id: "homelab"}) }},
		{"NodeGroupTemplateNodeInfo", func() (proto.Message, error) {
			return s.NodeGroupTemplateNodeInfo(ctx, &pb.NodeGroupTemplateNodeInfoRequest{Id: "homelab"})
		}},
		{"NodeGroupGetOptions", func() (proto.Message, error) {
			return s.NodeGroupGetOptions(ctx, &pb.NodeGroupAutoscalingOptionsRequest{Id: "homelab", Defaults: &pb.NodeGroupAutoscalingOptions{ScaleDownUtilizationThreshold: 0.5}})
		}},
		{"PricingNodePrice", func() (proto.Message, error) {
			return s.PricingNodePrice(ctx, &pb.PricingNodePriceRequest{Node: node, StartTimestamp: timestamppb.New(now.Add(-time.Hour)), EndTimestamp: timestamppb.New(now)})
		}},
		{"GPULabel", func() (proto.Message, error) { return s.GPULabel(ctx, &pb.GPULabelRequest{}) }},
		{"NodeGroupTargetSize of an unknown group", func() (proto.Message, error) {
			return s.NodeGroupTargetSize(ctx, &pb.NodeGroupTargetSizeRequest{Id: "nope"})
		}},
	}
	var out strings.Builder
	for _, c := range calls {
		m, err := c.call()
		fmt.Fprintf(&out, "== %s\n", c.name)
		if err != nil {
			fmt.Fprintf(&out, "error: %v\n", err)
			continue
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		enc := hex.EncodeToString(b)
		for len(enc) > 96 {
			out.WriteString(enc[:96] + "\n")
			enc = enc[96:]
		}
		out.WriteString(enc + "\n")
	}
	golden.Check(t, filepath.Join("testdata", "grpc.txt"), out.String(), rerun)
}

// writeDataDir plays the example story on the example pool, on a fake
// clock, and keeps the data dir it wrote at dst.
func writeDataDir(t *testing.T, dst string) {
	src := t.TempDir()
	t.Run("play the example story", func(t *testing.T) {
		sc, err := sim.LoadScenario(filepath.Join("..", "..", "deploy", "examples", "scenario.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		srv := eventstest.StartServerOn(t, src)
		h := handlerstest.OnServer(t, srv, eventlog.StoreConfig{})
		w := sim.NewWorld(sim.WorldConfig{Views: h.Views, Service: h.Service, Clock: h.Clock, Seed: 1, Timing: sc.TimingOf(), Log: quiet})
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		cfg, err := pool.Load(filepath.Join("..", "..", "deploy", "examples", "pool.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := (&pool.Applier{Service: h.Service, Views: h.Views, Clock: h.Clock, Log: quiet}).Apply(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		if err := w.Play(context.Background(), sc); err != nil {
			t.Fatal(err)
		}
		if err := h.Views.SnapshotNow(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	// The subtest's cleanups stopped the server: the dir is closed.
	if err := os.RemoveAll(dst); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	// The data dir's lock is the writing process's, not the data's.
	if err := os.Remove(filepath.Join(dst, "claimstream.lock")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			t.Logf("wrote %s", p)
		}
		return err
	})
}
