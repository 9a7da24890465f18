package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"

	"github.com/claimstream/claimstream/internal/power/ipmi/ipmisim"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
	"github.com/claimstream/claimstream/deploy/e2e/testenv"
)

// A group of two slots whose power block is ipmi, from IncreaseSize to
// scale-down: each lifecycle Job runs `claimstream power on|off` (the
// built binary, as a process of the test environment, with the Job's
// arguments and its mounted Secret) against a real BMC (ipmi_sim), and
// ipmitool sees each chassis switch on, then off.
func TestIPMIPowerThroughLifecycleJobs(t *testing.T) {
	ipmisim.Require(t)
	dumpOnFailure(t)
	dumpPowerJobsOnFailure(t)
	slots := []string{"ipmi-1", "ipmi-2"}
	bmcs := map[string]*ipmisim.BMC{}
	for _, s := range slots {
		bmcs[s] = startBMC(t, ipmiPorts[s])
		if got := bmcs[s].Ipmitool(t); got != "Chassis Power is off" {
			t.Fatalf("%s's BMC before the scale-up: %q", s, got)
		}
	}
	createBMCSecret(t, "bmc", ipmisim.Password)
	powerWorker(t)

	increaseSize(t, "ipmi", 2)
	waitT(t, 2*time.Minute, "both claims ready (instances running)", func() (bool, string) {
		ins := instances(t, "ipmi")
		n := 0
		for _, s := range slots {
			if in := ins[providerID(s)]; in != nil && in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning {
				n++
			}
		}
		return n == 2, describeInstances(ins)
	})
	claims := map[string]string{}
	for _, s := range slots {
		j := onlyJob(t, map[string]string{lOp: "startup", lSlot: s})
		claims[s] = j.Labels[lClaim]
		if jobPhase(&j) != "Complete" {
			t.Fatalf("startup Job %s of %s: %s", j.Name, s, jobPhase(&j))
		}
		assertPowerReport(t, j.Name, s, "on")
		if got := bmcs[s].Ipmitool(t); got != "Chassis Power is on" {
			t.Fatalf("ipmitool on %s's BMC after its startup Job: %q", s, got)
		}
	}

	from := map[string]int{}
	var nodes []*pb.ExternalGrpcNode
	for _, s := range slots {
		from[s] = len(model.EventsOf(s))
		nodes = append(nodes, &pb.ExternalGrpcNode{ProviderID: providerID(s), Name: s})
	}
	if _, err := provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{Id: "ipmi", Nodes: nodes}); err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	for _, s := range slots {
		var job string
		waitT(t, 2*time.Minute, s+"'s shutdown Job completed", func() (bool, string) {
			js := jobs(t, map[string]string{lOp: "shutdown", lClaim: claims[s]})
			if len(js) == 0 {
				return false, "no shutdown Job"
			}
			j := js[len(js)-1]
			job = j.Name
			return jobPhase(&j) == "Complete", j.Name + " " + jobPhase(&j)
		})
		assertPowerReport(t, job, s, "off")
		if got := bmcs[s].Ipmitool(t); got != "Chassis Power is off" {
			t.Fatalf("ipmitool on %s's BMC after its shutdown Job: %q", s, got)
		}
		waitMachine(t, s, "power-off", from[s], 30*time.Second)
	}
	waitT(t, time.Minute, "both claims completed (no instances, TargetSize 0)", func() (bool, string) {
		ins := instances(t, "ipmi")
		return len(ins) == 0 && targetSize(t, "ipmi") == 0, describeInstances(ins)
	})
}

// A slot whose credentials Secret holds a wrong password: its startup Job
// (`claimstream power on`) fails, the claim fails with the command's
// reason in its message, and the chassis stays off.
func TestIPMIWrongCredentialsFailTheClaim(t *testing.T) {
	ipmisim.Require(t)
	dumpOnFailure(t)
	dumpPowerJobsOnFailure(t)
	const slot = "ipmi-wrong-1"
	b := startBMC(t, ipmiPorts[slot])
	createBMCSecret(t, "bmc-wrong", "not-"+ipmisim.Password)
	powerWorker(t)

	increaseSize(t, "ipmi-wrong", 1)
	var info *pb.InstanceErrorInfo
	waitT(t, 2*time.Minute, "the claim failed (errorInfo on the instance)", func() (bool, string) {
		in := instances(t, "ipmi-wrong")[providerID(slot)]
		if e := in.GetStatus().GetErrorInfo(); e != nil {
			info = e
			return true, ""
		}
		return false, describeInstances(instances(t, "ipmi-wrong"))
	})
	t.Logf("the claim failed %s: %s", info.GetErrorCode(), info.GetErrorMessage())
	if info.GetErrorCode() != "StartupJobFailed" || !strings.Contains(info.GetErrorMessage(), "WrongCredentials") {
		t.Errorf("failure %s %q: want StartupJobFailed naming WrongCredentials", info.GetErrorCode(), info.GetErrorMessage())
	}
	j := onlyJob(t, map[string]string{lOp: "startup", lSlot: slot})
	if jobPhase(&j) != "Failed" {
		t.Errorf("startup Job %s: %s, want Failed", j.Name, jobPhase(&j))
	}
	if got := b.Ipmitool(t); got != "Chassis Power is off" {
		t.Errorf("ipmitool after the failed startup Job: %q, want the chassis left off", got)
	}
}

// startBMC starts ipmi_sim on the port the pool file names for its slot,
// ready once ipmitool reads its chassis.
func startBMC(t *testing.T, port int) *ipmisim.BMC {
	t.Helper()
	if port == 0 {
		t.Fatal("no BMC port reserved for the slot")
	}
	_, tool := ipmisim.Require(t)
	pw := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pw, []byte(ipmisim.Password), 0o600); err != nil {
		t.Fatal(err)
	}
	return ipmisim.Start(t, ipmisim.Options{Port: port}, func(ctx context.Context, port int) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, tool, "-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(port),
			"-U", ipmisim.User, "-f", pw, "-L", "OPERATOR", "-C", "3", "chassis", "power", "status").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	})
}

// createBMCSecret creates the credentials Secret the pool's power block
// names, in the Jobs' namespace, as an operator would.
func createBMCSecret(t *testing.T, name, password string) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Data:       map[string][]byte{"username": []byte(ipmisim.User), "password": []byte(password)},
	}
	secrets := admin.CoreV1().Secrets(namespace)
	if _, err := secrets.Create(ctxFor(t, 10*time.Second), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Secret %s: %v", name, err)
	}
	t.Cleanup(func() { _ = secrets.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// powerWorker adds a kwok node without taints for the test: a power
// driver's Job carries no toleration of the e2e worker's taint, and runs
// on any node, as in a cluster of ordinary workers.
func powerWorker(t *testing.T) {
	t.Helper()
	const name = "e2e-power-worker"
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok"},
			Annotations: map[string]string{machines.KwokAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	nodes := admin.CoreV1().Nodes()
	if _, err := nodes.Create(ctxFor(t, 10*time.Second), n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create node %s: %v", name, err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	waitT(t, 60*time.Second, "node "+name+" Ready", func() (bool, string) {
		n, ok := node(t, name)
		return ok && nodeReady(n), "not Ready"
	})
}

// onlyJob is the one lifecycle Job matching the labels.
func onlyJob(t *testing.T, labels map[string]string) batchv1.Job {
	t.Helper()
	js := jobs(t, labels)
	if len(js) != 1 {
		t.Fatalf("Jobs %v: %d, want 1", labels, len(js))
	}
	return js[0]
}

// assertPowerReport checks that Job job is a power driver's Job whose pod
// ended with `claimstream power`'s report: the BMC of slot in state.
func assertPowerReport(t *testing.T, job, slot, state string) {
	t.Helper()
	j, err := admin.BatchV1().Jobs(namespace).Get(ctxFor(t, 10*time.Second), job, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Job %s: %v", job, err)
	}
	if d := j.Labels[testenv.LabelPowerDriver]; d != "ipmi" {
		t.Fatalf("Job %s: %s=%q, want ipmi", job, testenv.LabelPowerDriver, d)
	}
	pods, err := admin.CoreV1().Pods(namespace).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of Job %s: %v, %v", job, pods, err)
	}
	cs := pods.Items[0].Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 0 {
		t.Fatalf("Job %s's container: %+v, want terminated with 0", job, cs)
	}
	var rep struct{ InstanceID, PowerState string }
	if err := json.Unmarshal([]byte(cs[0].State.Terminated.Message), &rep); err != nil {
		t.Fatalf("Job %s's termination message %q: %v", job, cs[0].State.Terminated.Message, err)
	}
	id := "ipmi:127.0.0.1:" + strconv.Itoa(ipmiPorts[slot])
	if rep.PowerState != state || rep.InstanceID != id {
		t.Fatalf("Job %s's report %+v: want power %s of %s", job, rep, state, id)
	}
}

// dumpPowerJobsOnFailure logs what the power Jobs' processes did if t fails.
func dumpPowerJobsOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("power jobs:\n%s", testenv.TailFile(filepath.Join(env.Dir, "logs", "powerjobs.log"), 8000))
		}
	})
}
