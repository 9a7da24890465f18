package serve

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkCLIStart runs `claimstream get slots` b.N times against a
// listener that accepts and never answers: what every command of the CLI
// pays before it does its work (the runtime's start and every linked
// package's init). Metrics, medians: from exec to the command's request
// connecting (start-ms), and the process's peak RSS then (hwm-MiB: the
// executable's pages it touched and what the inits allocated or wrote)
// with its anonymous part (anon-MiB). CLAIMSTREAM_BENCH_BASELINE=BINARY
// runs that build before this one each time and adds its medians (base-)
// and the ratios.
//
//	go test ./internal/serve -run '^$' -bench CLIStart -benchtime 20x
func BenchmarkCLIStart(b *testing.B) {
	bin := buildClaimstream(b)
	baseline := os.Getenv("CLAIMSTREAM_BENCH_BASELINE")
	var this, base cliStarts
	b.ResetTimer()
	for range b.N {
		if baseline != "" {
			base.run(b, baseline)
		}
		this.run(b, bin)
	}
	b.StopTimer()
	this.report(b, "")
	if baseline != "" {
		base.report(b, "base-")
		b.ReportMetric(float64(median(this.took))/float64(median(base.took)), "start-ratio")
		b.ReportMetric(median(this.hwm)/median(base.hwm), "hwm-ratio")
	}
}

// cliStarts gathers the runs of one binary.
type cliStarts struct {
	took      []time.Duration
	hwm, anon []float64 // MiB
}

func (s *cliStarts) report(b *testing.B, prefix string) {
	b.ReportMetric(float64(median(s.took).Microseconds())/1000, prefix+"start-ms")
	b.ReportMetric(median(s.hwm), prefix+"hwm-MiB")
	b.ReportMetric(median(s.anon), prefix+"anon-MiB")
}

func (s *cliStarts) run(b *testing.B, bin string) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(bin, "get", "slots", "--server", "http://"+ln.Addr().String(), "--token", "bench",
		"--cli-config", filepath.Join(b.TempDir(), "none.yaml"))
	began := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second))
	conn, err := ln.Accept()
	if err != nil {
		b.Fatalf("%s get slots did not connect: %v", bin, err)
	}
	defer conn.Close()
	s.took = append(s.took, time.Since(began))
	kib := procStatusKiB(b, cmd.Process.Pid)
	s.hwm = append(s.hwm, kib["VmHWM"]/1024)
	s.anon = append(s.anon, kib["RssAnon"]/1024)
}
