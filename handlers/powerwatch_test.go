package handlers_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/handlers"
	"github.com/claimstream/claimstream/handlers/decide"
	"github.com/claimstream/claimstream/handlers/kube"
	"github.com/claimstream/claimstream/internal/power/ipmi"
	"github.com/claimstream/claimstream/internal/power/ipmi/ipmisim"
	"github.com/claimstream/claimstream/internal/power/powercmd"
	"github.com/claimstream/claimstream/projections"
)

// readings counts the power watch's readings as the metrics see them.
type readings struct {
	mu sync.Mutex
	n  map[string]int // "driver outcome" -> count
}

func (r *readings) PowerRead(driver, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[driver+" "+outcome]++
}

func (r *readings) of(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[key]
}

// powerEnv is a reactor environment whose slot "a" is switched by a real
// BMC (ipmi_sim), its credentials in the Secret "bmc", and whose reactors
// read Node-less slots' power drivers every minute.
func powerEnv(t *testing.T, password string) (*renv, *ipmi.Driver, *ipmisim.BMC, *readings) {
	t.Helper()
	bmc := ipmisim.Start(t, ipmisim.Options{}, func(ctx context.Context, port int) error {
		_, err := (&ipmi.Driver{Host: "127.0.0.1", Port: port, Username: ipmisim.User, Password: ipmisim.Password, CipherSuite: 3, Timeout: time.Second}).Status(ctx)
		return err
	})
	counted := &readings{n: map[string]int{}}
	e := newRenvWith(t, kube.Options{PowerImage: "claimstream:test"}, func(e *renv, c *handlers.ReactorsConfig) {
		c.Power, c.PowerEvery, c.PowerMetrics = powercmd.Reader{Secret: e.cl.Secret}, time.Minute, counted
	})
	_, err := e.f.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "bmc", Namespace: ns},
		Data:       map[string][]byte{"username": []byte(ipmisim.User), "password": []byte(password)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &events.Power{Driver: events.PowerIPMI, Address: "127.0.0.1:" + strconv.Itoa(bmc.Port), CredentialsSecret: "bmc", CipherSuite: 3, Hard: true}
	e.h.DeclareWith("g", events.GroupSpec{}, func(sl string) events.SlotSpec {
		return events.SlotSpec{ProviderID: "homelab://" + sl, Startup: &events.JobSpec{Power: p}, Shutdown: &events.JobSpec{Power: p}}
	}, "a")
	chassis := &ipmi.Driver{Host: "127.0.0.1", Port: bmc.Port, Username: ipmisim.User, Password: ipmisim.Password, CipherSuite: 3, Timeout: time.Second, Hard: true}
	return e, chassis, bmc, counted
}

// A machine switched on by hand, with no claim and no Node, is read on
// through its BMC and the input law switches it off; the reading off is
// recorded as the input law's power-off. The Node observer does not undo
// the driver's reading while no Node exists.
func TestPowerWatchSeesAMachineOnBeforeItJoins(t *testing.T) {
	e, chassis, bmc, counted := powerEnv(t, ipmisim.Password)
	e.passes()
	if f := e.powerFacts("a"); len(f) != 0 {
		t.Fatalf("facts %+v of a machine off from the start, want none", f)
	}
	if err := chassis.On(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.step(time.Minute)
	e.passes()
	facts := e.powerFacts("a")
	if len(facts) != 1 {
		t.Fatalf("facts %+v, want one MachinePoweredOn", facts)
	}
	on, ok := facts[0].(events.MachinePoweredOn)
	if !ok || on.AtSource != events.AtPowerDriver || on.Claim != "" {
		t.Fatalf("fact %+v, want on from the power driver, no claim", facts[0])
	}
	stop := decide.JobName("a", "stop", 1)
	jobs := e.jobs()
	var shutdown string
	for j := range jobs {
		shutdown = j
	}
	if len(jobs) != 1 {
		t.Fatalf("jobs %v, want the input law's shutdown Job (like %s)", jobs, stop)
	}
	e.passes()
	if f := e.powerFacts("a"); len(f) != 1 {
		t.Fatalf("facts %+v after more passes, want still one", f)
	}

	// The shutdown Job runs `claimstream power off`: here, the BMC's
	// chassis goes off and the Job succeeds.
	if err := chassis.Off(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := bmc.Ipmitool(t); got != "Chassis Power is off" {
		t.Fatalf("ipmitool: %q", got)
	}
	e.finishJob(shutdown, true, "")
	e.step(time.Minute)
	e.passes()
	facts = e.powerFacts("a")
	if len(facts) != 2 {
		t.Fatalf("facts %+v, want on then off", facts)
	}
	off, ok := facts[1].(events.MachinePoweredOff)
	if !ok || off.AtSource != events.AtPowerDriver || off.Reason != events.PowerOffInputLaw {
		t.Fatalf("fact %+v, want off from the power driver after the input law's shutdown", facts[1])
	}
	e.step(10 * time.Minute)
	e.passes()
	if n := len(e.jobs()); n != 1 {
		t.Fatalf("%d Jobs after the machine is off, want the one shutdown", n)
	}
	if counted.of("ipmi on") == 0 || counted.of("ipmi off") < 2 || counted.of("ipmi failed") != 0 {
		t.Fatalf("readings counted %v", counted.n)
	}
}

// A BMC that refuses the Secret's password gives no reading: nothing is
// recorded and nothing is switched.
func TestPowerWatchWithWrongCredentialsRecordsNothing(t *testing.T) {
	e, chassis, _, counted := powerEnv(t, "not-the-password")
	if err := chassis.On(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.passes()
	e.step(time.Minute)
	e.passes()
	if f := e.powerFacts("a"); len(f) != 0 {
		t.Fatalf("facts %+v, want none", f)
	}
	if j := e.jobs(); len(j) != 0 {
		t.Fatalf("jobs %v, want none", j)
	}
	if counted.of("ipmi failed") != 2 || counted.of("ipmi on") != 0 {
		t.Fatalf("readings counted %v, want two failed", counted.n)
	}
}

// A claim's machine is on from its Node's Ready, not from its BMC: while
// a claim boots it, the power watch records nothing, so the boot lasts
// until Ready in the story and the cost report.
func TestPowerWatchLeavesAClaimsMachineToItsNode(t *testing.T) {
	e, chassis, _, _ := powerEnv(t, ipmisim.Password)
	e.increase("g", 1)
	e.passes()
	if err := chassis.On(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.step(time.Minute)
	e.passes()
	if f := e.powerFacts("a"); len(f) != 0 {
		t.Fatalf("facts %+v while a claim boots the machine, want none", f)
	}
	if c := e.claim("a"); c.Phase != projections.PhaseBooting {
		t.Fatalf("claim %+v, want booting", c)
	}
}
