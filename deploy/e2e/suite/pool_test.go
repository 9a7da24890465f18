package suite

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/claimstream/claimstream/deploy/e2e/machines"
)

// The e2e pool: one group per scenario so that each scenario knows its
// slots; short lifecycle timeouts, so a deadline is about a minute, not
// 12m10s; a readiness taint the machine model removes late. The lifecycle
// Jobs run on the always-present worker node (kwok completes their pods;
// the image is never pulled). The ipmi groups' Jobs are power drivers'
// Jobs, run by machines.PowerJobs.
const e2ePool = `
groups:
  - name: boot      # scenarios 1 and 2
    maxSize: 2
    readinessTaints: &rt [{key: e2e.claimstream.dev/not-ready, effect: NoExecute}]
    lifecycle: &lc {startupJobTimeout: 20s, registrationWait: 10s, readinessGate: 15s}
    template: &tmpl
      capacity: {cpu: "8", memory: 32Gi, pods: "110"}
  - name: fail      # scenario 3: a machine that never boots
    readinessTaints: *rt
    lifecycle: *lc
    template: *tmpl
  - name: law       # scenario 4: a Node that joins with no claim
    readinessTaints: *rt
    lifecycle: *lc
    template: *tmpl
  - name: crash     # scenario 5: kill -9 of the server mid-boot
    readinessTaints: *rt
    lifecycle: *lc
    template: *tmpl
  - name: burst     # a machine that registers under another name (hosts_test.go)
    readinessTaints: *rt
    lifecycle: *lc
    template: *tmpl
  - name: long      # a slot name of 215 characters (hosts_test.go)
    readinessTaints: *rt
    lifecycle: *lc
    template: *tmpl
  - name: cost      # one claim's machine-hours against its Node (cost_test.go)
    readinessTaints: *rt
    lifecycle: *lc
    template: *tmpl
    cost: {powerWatts: 100, energyPricePerKWh: 0.30, currency: EUR}
  - name: ipmi      # two BMCs switched by power Jobs (power_test.go)
    maxSize: 2
    readinessTaints: *rt
    lifecycle: &plc {startupJobTimeout: 60s, registrationWait: 20s, readinessGate: 20s}
    template: *tmpl
    power: {driver: ipmi, credentialsSecret: bmc, hard: true, cipherSuite: 3}
  - name: ipmi-wrong  # a BMC whose Secret holds a wrong password (power_test.go)
    readinessTaints: *rt
    lifecycle: *plc
    template: *tmpl
    power: {driver: ipmi, credentialsSecret: bmc-wrong, hard: true, cipherSuite: 3}

slots:
  - name: boot-1
    group: boot
    startup: &power
      podSpec:
        restartPolicy: Never
        nodeSelector: {e2e.claimstream.dev/worker: "true"}
        tolerations: [{key: e2e.claimstream.dev/worker, operator: Exists, effect: NoSchedule}]
        containers:
          - name: power
            image: e2e.invalid/power:never-pulled
            command: ["/bin/true"]
    shutdown: *power
  - {name: boot-2, group: boot, startup: *power, shutdown: *power}
  - {name: fail-1, group: fail, startup: *power, shutdown: *power}
  - {name: law-1, group: law, startup: *power, shutdown: *power}
  - {name: crash-1, group: crash, startup: *power, shutdown: *power}
  - {name: burst-1, group: burst, startup: *power, shutdown: *power}
  - {name: cost-1, group: cost, startup: *power, shutdown: *power}
  - {name: rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.machine-with-a-long-name-1, group: long, startup: *power, shutdown: *power}
  - {name: ipmi-1, group: ipmi, power: {address: "127.0.0.1:IPMI_PORT_1"}}
  - {name: ipmi-2, group: ipmi, power: {address: "127.0.0.1:IPMI_PORT_2"}}
  - {name: ipmi-wrong-1, group: ipmi-wrong, power: {address: "127.0.0.1:IPMI_PORT_3"}}
`

// ipmiSlots are the slots of the ipmi groups, each with the UDP port its
// BMC (power_test.go) serves on; setup reserves the ports, as the BMCs'
// addresses are in the pool file serve starts with.
var ipmiSlots = []string{"ipmi-1", "ipmi-2", "ipmi-wrong-1"}

var ipmiPorts = map[string]int{}

// e2ePoolFile is e2ePool with the BMCs' ports.
func e2ePoolFile() string {
	var r []string
	for i, s := range ipmiSlots {
		r = append(r, fmt.Sprintf("IPMI_PORT_%d", i+1), strconv.Itoa(ipmiPorts[s]))
	}
	return strings.NewReplacer(r...).Replace(e2ePool)
}

func e2eSlots() []machines.Slot {
	var out []machines.Slot
	for _, n := range append([]string{"boot-1", "boot-2", "fail-1", "law-1", "crash-1", longSlot, "cost-1"}, ipmiSlots...) {
		out = append(out, machines.Slot{
			Name:            n,
			ReadinessTaints: []corev1.Taint{{Key: readyTaint, Effect: corev1.TaintEffectNoExecute}},
		})
	}
	// A cloud instance: its Node is named by its provider, and its startup
	// Job reports that name and providerID.
	out = append(out, machines.Slot{
		Name: "burst-1", NodeName: burstNode, ProviderID: burstProviderID,
		ReadinessTaints: []corev1.Taint{{Key: readyTaint, Effect: corev1.TaintEffectNoExecute}},
	})
	return out
}

// The slots of hosts_test.go.
const (
	longSlot        = "rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.rack-a.machine-with-a-long-name-1"
	burstNode       = "ip-10-0-3-7"
	burstProviderID = "kwok://e2e/i-burst-1"
)
