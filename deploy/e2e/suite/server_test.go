package suite

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// Server is `claimstream serve` as a separate process against the e2e cluster.
type Server struct {
	Bin, Dir, Pool, Kubeconfig, Namespace   string
	GRPCAddress, APIAddress, MetricsAddress string

	help string

	proc   *testenv.Process
	starts int
}

// Start starts the server (again: same data dir, same ports).
func (s *Server) Start(ctx context.Context) error {
	s.starts++
	name := fmt.Sprintf("claimstream-%d", s.starts)
	args := []string{
		"serve",
		"--config", s.Pool,
		"--kubeconfig", s.Kubeconfig,
		"--namespace", s.Namespace,
		"--plaintext",
		"--grpc-address", s.GRPCAddress,
		"--data-dir", filepath.Join(s.Dir, "claimstream-data"),
		"--leader-elect=false",
		"--log-level=debug",
		"--config-poll=1s",
		// The power drivers' Jobs run the claimstream binary
		// (machines.PowerJobs), never this image.
		"--power-image=claimstream:e2e",
	}
	// Every listener on a loopback port of its own (flags the binary has).
	for flag, addr := range map[string]string{"--api-address": s.APIAddress, "--metrics-address": s.MetricsAddress} {
		if s.hasFlag(flag) {
			args = append(args, flag, addr)
		}
	}
	p, err := testenv.StartProcess(name, s.Bin, args, filepath.Join(s.Dir, "logs"), nil)
	if err != nil {
		return err
	}
	s.proc = p
	allPids = append(allPids, p.Pid())
	fmt.Printf("e2e: started %s (pid %d)\n", name, p.Pid())
	return nil
}

func (s *Server) hasFlag(name string) bool {
	if s.help == "" {
		out, _ := exec.Command(s.Bin, "serve", "--help").CombinedOutput()
		s.help = string(out)
	}
	return strings.Contains(s.help, name+" ")
}

// Kill is kill -9 of the server.
func (s *Server) Kill() {
	if s.proc != nil {
		s.proc.Kill()
	}
}

// Stop stops the server with SIGTERM (SIGKILL after 10s).
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop(10 * time.Second)
	}
}

// Tail is the end of the current server log.
func (s *Server) Tail() string {
	if s.proc == nil {
		return ""
	}
	return "\n--- " + s.proc.Name + " log tail ---\n" + testenv.TailFile(s.proc.LogPath, 6000)
}
