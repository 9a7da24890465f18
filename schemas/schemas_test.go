package schemas_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// --- samples -------------------------------------------------------------

func dur(d time.Duration) events.Duration   { return events.Duration(d) }
func pdur(d time.Duration) *events.Duration { v := dur(d); return &v }
func ptr[T any](v T) *T                     { return &v }

var (
	at = time.Date(2026, 3, 14, 9, 26, 53, 589793238, time.UTC)
	// fullRef sets every field of Ref.
	fullRef = events.Ref{Claim: "worker-1-a3", Slot: "worker-1", Group: "workers", Attempt: 3, Cause: "IncreaseSize(+2) by cluster-autoscaler"}
	// minRef sets only what every event must carry.
	minRef = events.Ref{Group: "workers", Cause: "deadline passed"}

	podSpec = json.RawMessage(`{"containers":[{"name":"x","image":"busybox"}]}`)
	taints  = []events.Taint{
		{Key: "dedicated", Value: "gpu", Effect: "NoSchedule"},
		{Key: "node.cilium.io/agent-not-ready", Value: "true", Effect: "NoExecute"},
	}
	request = events.Request{Call: events.CallIncreaseSize, Delta: 2, Group: "workers", Nodes: []string{"worker-1", "worker-2"}, Key: "caller cluster-autoscaler workers +2 #5f3a9c01e2b4"}

	fullGroupSpec = events.GroupSpec{
		MinSize:              1,
		MaxSize:              5,
		MaxNodeProvisionTime: dur(12*time.Minute + 10*time.Second),
		ReadinessTaints:      taints,
		Scaler:               events.ScalerBuiltin,
		ClaimTTL:             dur(time.Hour),
		Lifecycle: events.Lifecycle{
			StartupJobTimeout: dur(5 * time.Minute),
			RegistrationWait:  dur(90 * time.Second),
			ReadinessGate:     dur(1500 * time.Millisecond),
		},
		Template: &events.NodeTemplate{
			Labels:      map[string]string{"node.kubernetes.io/instance-type": "homelab-8c32g"},
			Annotations: map[string]string{"claimstream.dev/owner": "ops"},
			Taints:      taints,
			Capacity:    map[string]string{"cpu": "8", "memory": "32Gi", "pods": "110"},
			Allocatable: map[string]string{"cpu": "7500m", "memory": "30Gi", "pods": "110"},
			Pricing:     &events.Pricing{NodePerHour: 0.12, PodPerHour: 0.01},
		},
		Autoscaling: &events.AutoscalingOptions{
			ScaleDownUtilizationThreshold:    ptr(0.5),
			ScaleDownGpuUtilizationThreshold: ptr(0.25),
			ScaleDownUnneededTime:            pdur(10 * time.Minute),
			ScaleDownUnreadyTime:             pdur(20 * time.Minute),
			ZeroOrMaxNodeScaling:             ptr(true),
			IgnoreDaemonSetsUtilization:      ptr(true),
		},
		Builtin:        &events.BuiltinScaler{PodsPerNode: 10, MaxNodes: 4, Hold: dur(300 * time.Millisecond)},
		GPULabel:       "nvidia.com/gpu.present",
		DrainTimeout:   dur(10 * time.Minute),
		OnDrainTimeout: events.DrainForce,
		Cost:           &events.Cost{PricePerHour: ptr(0.12), PowerWatts: ptr(65.0), BootWatts: ptr(90.0), EnergyPricePerKWh: ptr(0.30), Currency: "EUR"},
	}

	fullSlotSpec = events.SlotSpec{
		ProviderID: "homelab://worker-1",
		Address:    "10.0.0.21",
		Startup: &events.JobSpec{PodSpec: podSpec, TTLSecondsAfterFinished: ptr(int32(600)), Power: &events.Power{
			Driver: "proxmox", Address: "https://pve.lan:8006", CredentialsSecret: "pve-token", Hard: true,
			MAC: "52:54:00:12:34:56", Broadcast: "10.0.0.255", Probe: "10.0.0.31:22", CipherSuite: 17,
			System: "1", Session: true, Fingerprint: "AB", Domain: "node-3", URI: "test:///default",
			Node: "pve1", VMID: 101, Kind: "lxc", TokenID: "root@pam!claimstream",
		}},
		Shutdown: &events.JobSpec{PodSpec: podSpec, TTLSecondsAfterFinished: ptr(int32(0)), Power: &events.Power{
			Driver: "ipmi", Address: "10.0.0.21", CredentialsSecret: "bmc", Hard: true,
			MAC: "52:54:00:12:34:56", Broadcast: "10.0.0.255", Probe: "10.0.0.31:22", CipherSuite: 3,
			System: "1", Session: true, Fingerprint: "AB", Domain: "node-3", URI: "test:///default",
			Node: "pve1", VMID: 101, Kind: "lxc", TokenID: "root@pam!claimstream",
		}},
		Labels:   map[string]string{"topology.kubernetes.io/zone": "rack-a"},
		Taints:   taints,
		Capacity: map[string]string{"cpu": "8", "nvidia.com/gpu": "1"},
		Cost:     &events.Cost{PricePerHour: ptr(0.2), PowerWatts: ptr(120.0), BootWatts: ptr(150.0), EnergyPricePerKWh: ptr(0.25), Currency: "EUR"},
	}
)

// fullSamples holds, for every type, a value with every field set (checked
// by TestFullSamplesSetEveryField).
var fullSamples = []events.Data{
	events.GroupDeclared{Ref: fullRef, Spec: fullGroupSpec},
	events.GroupChanged{Ref: fullRef, Spec: fullGroupSpec},
	events.GroupRetired{Ref: fullRef},
	events.ScaleDecided{Ref: fullRef, Demand: 7, Target: 2, Nodes: 1, Action: "scale-up", Reason: "7 pending pods", Slots: []string{"worker-1"}},
	events.SlotDeclared{Ref: fullRef, Spec: fullSlotSpec},
	events.SlotChanged{Ref: fullRef, Spec: fullSlotSpec},
	events.SlotRetired{Ref: fullRef},
	events.SlotDecommissioned{Ref: fullRef, By: "alice", Reason: "disk replacement"},
	events.SlotRecommissioned{Ref: fullRef, By: "alice"},
	events.ClaimCreated{
		Ref: fullRef, RequestedAt: at, RequestedBy: "cluster-autoscaler", Request: request,
		DeadlineAt: at.Add(12*time.Minute + 10*time.Second), Budget: dur(10 * time.Minute),
		MaxNodeProvisionTime: dur(12*time.Minute + 10*time.Second), TTL: dur(time.Hour),
	},
	events.ClaimBooting{Ref: fullRef, StartupJob: "worker-1-a3-startup"},
	events.ClaimReady{Ref: fullRef, Node: "worker-1"},
	events.ClaimFailed{Ref: fullRef, Reason: "DeadlineExceeded", Message: "not ready after 12m10s", ForceShutdown: true},
	events.ClaimCancelled{Ref: fullRef, Reason: "CancelledByDecreaseTargetSize", RequestedBy: "cluster-autoscaler", Request: &events.Request{Call: events.CallDecreaseTargetSize, Delta: -1, Group: "workers", Nodes: []string{"worker-1"}, Key: "caller cluster-autoscaler workers +2 #5f3a9c01e2b4"}},
	events.ClaimCompleted{Ref: fullRef, Reason: "ScaledDown"},
	events.ClaimSuperseded{Ref: fullRef, By: "worker-1-a4"},
	events.ScaleDownRequested{Ref: fullRef, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Delta: 1, Group: "workers", Nodes: []string{"worker-1"}, Key: "caller cluster-autoscaler workers +2 #5f3a9c01e2b4"}, Reason: "ScaledDown"},
	events.ShutdownFired{Ref: fullRef, Job: "worker-1-a3-shutdown-2", ShutdownAttempt: 2, Force: true},
	events.ShutdownAttemptLimitReached{Ref: fullRef, Attempts: 3, PausedUntil: at.Add(time.Hour)},
	events.MachineObservedOff{Ref: fullRef},
	events.MachineObservedOn{Ref: fullRef},
	events.ClaimCollected{Ref: fullRef},
	events.NodeObserved{Ref: fullRef, Node: events.NodeState{
		Name: "worker-1", ProviderID: "homelab://worker-1", Present: true, Ready: true, Unschedulable: true,
		Taints: taints, ToBeDeleted: true, Address: "10.0.0.21",
	}},
	events.HostJoined{Ref: fullRef, Node: "worker-1", MatchedBy: "providerID"},
	events.HostJoinRefused{Ref: fullRef, Node: "intruder-1", Why: "no claim expects it"},
	events.HostExpected{Ref: fullRef, Node: "worker-1", ProviderID: "homelab://worker-1", Address: "10.0.0.21", InstanceID: "i-0abc", DeadlineAt: at},
	events.DrainStarted{Ref: fullRef, Node: "worker-1", Pods: []string{"default/web-0"}, Timeout: dur(10 * time.Minute), Policy: events.DrainEvict},
	events.DrainTimedOut{Ref: fullRef, Node: "worker-1", Policy: events.DrainForce, Remaining: []string{"default/web-0"}},
	events.UnclaimedShutdownPaused{Ref: fullRef, Attempts: 3, PausedUntil: at.Add(30 * time.Minute)},
	events.NodeDeleteRequested{Ref: fullRef, Node: "worker-1", Why: "NotReady after its shutdown"},
	events.MachinePoweredOn{Ref: fullRef, Node: "worker-1", At: at, AtSource: events.AtNodeCondition},
	events.MachinePoweredOff{Ref: fullRef, Node: "worker-1", At: at, AtSource: events.AtObserved, Reason: events.PowerOffInputLaw},
	events.FailedInstanceDeleted{Ref: fullRef, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Delta: 1, Group: "workers", Nodes: []string{"homelab://worker-1"}, Key: "caller cluster-autoscaler workers +2 #5f3a9c01e2b4"}},
	events.SizeIncreased{Ref: fullRef, Delta: 2, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallIncreaseSize, Delta: 2, Group: "workers", Nodes: []string{"worker-1"}, Key: "caller cluster-autoscaler workers +2 #5f3a9c01e2b4"}, Claims: []string{"worker-1-0001", "worker-2-0001"}},
	events.SizeDecreased{Ref: fullRef, Delta: 1, RequestedBy: "cluster-autoscaler", Request: events.Request{Call: events.CallDeleteNodes, Delta: -1, Group: "workers", Nodes: []string{"worker-1"}, Key: "caller cluster-autoscaler workers +2 #5f3a9c01e2b4"}, Claims: []string{"worker-1-0001"}},
	events.LeaderElected{Replica: "claimstream-1", Epoch: 4, GRPCAddress: "10.0.0.5:8086", APIAddress: "10.0.0.5:8087", Cause: "key-value lease claimstream-leader"},
	events.ScaleRequested{Ref: fullRef, Call: events.CallDeleteNodes, Delta: 2, Nodes: []string{"worker-1"}, Requester: "cluster-autoscaler", Accepted: true, Reason: "maxSize", Repeats: 3},
	events.DemandObserved{Ref: fullRef, Demand: 9, Pending: 4, Running: 5},
	events.JobObserved{Ref: fullRef, Job: "worker-1-start-3", Operation: "startup", Created: true, Outcome: events.JobFailed, FinishedAt: &at, Reason: "BackoffLimitExceeded", Message: "Unreachable: no BMC answered"},
}

// minimalSamples are zero values with only Ref.Group and Ref.Cause set; the
// fields that are always written stay at their zero value, except where the
// zero value is outside the field's closed set (Request.call,
// GroupSpec.scaler) or range (ShutdownAttemptLimitReached.attempts): a writer
// must always set those.
var minimalSamples = []events.Data{
	events.GroupDeclared{Ref: minRef, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}},
	events.GroupChanged{Ref: minRef, Spec: events.GroupSpec{Scaler: events.ScalerClusterAutoscaler}},
	events.GroupRetired{Ref: minRef},
	events.ScaleDecided{Ref: minRef},
	events.SlotDeclared{Ref: minRef},
	events.SlotChanged{Ref: minRef},
	events.SlotRetired{Ref: minRef},
	events.SlotDecommissioned{Ref: minRef},
	events.SlotRecommissioned{Ref: minRef},
	events.ClaimCreated{Ref: minRef, Request: events.Request{Call: events.CallManual}},
	events.ClaimBooting{Ref: minRef},
	events.ClaimReady{Ref: minRef},
	events.ClaimFailed{Ref: minRef},
	events.ClaimCancelled{Ref: minRef},
	events.ClaimCompleted{Ref: minRef},
	events.ClaimSuperseded{Ref: minRef},
	events.ScaleDownRequested{Ref: minRef, Request: events.Request{Call: events.CallDecide}},
	events.ShutdownFired{Ref: minRef},
	events.ShutdownAttemptLimitReached{Ref: minRef, Attempts: 1},
	events.MachineObservedOff{Ref: minRef},
	events.MachineObservedOn{Ref: minRef},
	events.ClaimCollected{Ref: minRef},
	events.NodeObserved{Ref: minRef},
	events.HostJoined{Ref: minRef},
	events.HostJoinRefused{Ref: minRef},
	events.HostExpected{Ref: minRef},
	events.DrainStarted{Ref: minRef, Policy: events.DrainWait},
	events.DrainTimedOut{Ref: minRef, Policy: events.DrainWait},
	events.UnclaimedShutdownPaused{Ref: minRef, Attempts: 1},
	events.NodeDeleteRequested{Ref: minRef},
	events.MachinePoweredOn{Ref: minRef, AtSource: events.AtObserved},
	events.MachinePoweredOff{Ref: minRef, AtSource: events.AtObserved, Reason: events.PowerOffNotReady},
	events.FailedInstanceDeleted{Ref: minRef, Request: events.Request{Call: events.CallDeleteNodes}},
	events.SizeIncreased{Ref: minRef, Delta: 1, Request: events.Request{Call: events.CallIncreaseSize}},
	events.SizeDecreased{Ref: minRef, Delta: 1, Request: events.Request{Call: events.CallDecreaseTargetSize}},
	events.LeaderElected{Replica: "claimstream-0", Epoch: 1, Cause: minRef.Cause},
	events.ScaleRequested{Ref: minRef, Call: events.CallIncreaseSize},
	events.DemandObserved{Ref: minRef},
	events.JobObserved{Ref: minRef, Operation: "shutdown"},
}

func marshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	return b
}

// sampleOf returns the full sample of type typ.
func sampleOf(t *testing.T, typ events.Type) events.Data {
	t.Helper()
	for _, d := range fullSamples {
		if d.EventType() == typ {
			return d
		}
	}
	t.Fatalf("no full sample of %s", typ)
	return nil
}

// --- catalog and files ---------------------------------------------------

func TestEveryTypeHasASchemaAndEverySchemaAType(t *testing.T) {
	var catalog []string
	for _, typ := range events.Types() {
		catalog = append(catalog, string(typ))
	}
	have := schemas.EventTypes()
	for _, typ := range catalog {
		if !slices.Contains(have, typ) {
			t.Errorf("event type %s has no schema events/%s.v1.json", typ, typ)
		}
	}
	for _, typ := range have {
		if !slices.Contains(catalog, typ) {
			t.Errorf("schema events/%s.v1.json names no type of events.Types()", typ)
		}
	}
	if !slices.IsSorted(have) {
		t.Errorf("EventTypes() = %v, not sorted", have)
	}

	// Every file of the events directory is a type's schema or the defs.
	files, err := fs.Glob(schemas.FS, "events/*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		typ, ok := strings.CutSuffix(strings.TrimPrefix(f, "events/"), ".v1.json")
		if !ok || (typ != "defs" && !slices.Contains(catalog, typ)) {
			t.Errorf("unexpected file %s in schemas/events", f)
		}
	}
}

func readJSON(t *testing.T, name string) map[string]any {
	t.Helper()
	b, err := fs.ReadFile(schemas.FS, name)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func TestSchemaHeaders(t *testing.T) {
	for _, typ := range events.Types() {
		t.Run(string(typ), func(t *testing.T) {
			s := readJSON(t, "events/"+string(typ)+".v1.json")
			want := map[string]any{
				"$schema":              "https://json-schema.org/draft/2020-12/schema",
				"$id":                  events.SchemaURL(typ),
				"title":                string(typ),
				"type":                 "object",
				"additionalProperties": true,
			}
			for k, v := range want {
				if s[k] != v {
					t.Errorf("%s = %v, want %v", k, s[k], v)
				}
			}
			if d, _ := s["description"].(string); !strings.HasSuffix(d, ".") || strings.Count(d, ". ") > 0 {
				t.Errorf("description %q is not one sentence", d)
			}
		})
	}
	defs := readJSON(t, "events/defs.v1.json")
	if defs["$id"] != "https://claimstream.dev/schemas/events/defs.v1.json" {
		t.Errorf("defs $id = %v", defs["$id"])
	}
}

// TestSchemasMatchGoTypes walks each event's Go struct and its schema side by
// side: the schema must list exactly the struct's JSON fields as properties,
// require exactly the fields without omitempty, and give each the JSON type
// encoding/json writes. It follows $refs into defs and recurses into nested
// structs, so a field added to events/types.go without its schema fails here.
func TestSchemasMatchGoTypes(t *testing.T) {
	defs := readJSON(t, "events/defs.v1.json")["$defs"].(map[string]any)
	resolve := func(s map[string]any) map[string]any {
		for {
			ref, ok := s["$ref"].(string)
			if !ok {
				return s
			}
			_, name, ok := strings.Cut(ref, "#/$defs/")
			if !ok || (!strings.HasPrefix(ref, "#") && !strings.HasPrefix(ref, "defs.v1.json#")) {
				t.Fatalf("unexpected $ref %q", ref)
			}
			next, ok := defs[name].(map[string]any)
			if !ok {
				t.Fatalf("$ref %q: no such definition", ref)
			}
			s = next
		}
	}
	for _, sample := range fullSamples {
		typ := sample.EventType()
		t.Run(string(typ), func(t *testing.T) {
			s := readJSON(t, "events/"+string(typ)+".v1.json")
			compareStruct(t, string(typ), reflect.TypeOf(sample), s, resolve)
		})
	}
}

type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
}

// jsonFields lists the fields encoding/json writes for struct type rt,
// flattening untagged embedded structs (Ref).
func jsonFields(rt reflect.Type) []jsonField {
	var out []jsonField
	for i := range rt.NumField() {
		f := rt.Field(i)
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() || tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{name, slices.Contains(strings.Split(opts, ","), "omitempty"), f.Type})
	}
	return out
}

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[events.Duration]()
	rawType      = reflect.TypeFor[json.RawMessage]()
)

func compareStruct(t *testing.T, where string, rt reflect.Type, s map[string]any, resolve func(map[string]any) map[string]any) {
	t.Helper()
	props, _ := s["properties"].(map[string]any)
	var required []string
	for _, r := range s["required"].([]any) {
		required = append(required, r.(string))
	}
	var names, wantRequired []string
	for _, f := range jsonFields(rt) {
		names = append(names, f.name)
		if !f.omitempty {
			wantRequired = append(wantRequired, f.name)
		}
		ps, ok := props[f.name].(map[string]any)
		if !ok {
			t.Errorf("%s: field %q (%s) has no property in the schema", where, f.name, f.typ)
			continue
		}
		compareValue(t, where+"."+f.name, f.typ, resolve(ps), resolve)
	}
	for p := range props {
		if !slices.Contains(names, p) {
			t.Errorf("%s: property %q is no field of %s", where, p, rt)
		}
	}
	slices.Sort(required)
	slices.Sort(wantRequired)
	if !slices.Equal(required, wantRequired) {
		t.Errorf("%s: required = %v, want the fields without omitempty %v", where, required, wantRequired)
	}
}

func compareValue(t *testing.T, where string, rt reflect.Type, s map[string]any, resolve func(map[string]any) map[string]any) {
	t.Helper()
	nullable := false
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	var want string
	switch {
	case rt == timeType || rt == durationType:
		want = "string"
	case rt == rawType:
		want = "object"
		nullable = true
	default:
		switch rt.Kind() {
		case reflect.String:
			want = "string"
		case reflect.Bool:
			want = "boolean"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
			want = "integer"
		case reflect.Float32, reflect.Float64:
			want = "number"
		case reflect.Map, reflect.Struct:
			want = "object"
		case reflect.Slice:
			want = "array"
			nullable = true
		default:
			t.Fatalf("%s: unhandled Go type %s", where, rt)
		}
	}
	types := schemaTypes(s)
	if !slices.Contains(types, want) {
		t.Errorf("%s: schema types %v, want %s for Go %s", where, types, want, rt)
	}
	for _, st := range types {
		if st != want && !(nullable && st == "null") {
			t.Errorf("%s: schema allows %s, which encoding/json never writes for Go %s", where, st, rt)
		}
	}
	switch {
	case rt == durationType:
		if s["pattern"] == nil {
			t.Errorf("%s: duration without a pattern", where)
		}
	case rt == timeType:
		if s["format"] != "date-time" {
			t.Errorf("%s: time without format date-time", where)
		}
	case rt.Kind() == reflect.Struct:
		compareStruct(t, where, rt, s, resolve)
	case rt.Kind() == reflect.Slice && rt != rawType:
		items, ok := s["items"].(map[string]any)
		if !ok {
			t.Errorf("%s: array without items", where)
			return
		}
		compareValue(t, where+"[]", rt.Elem(), resolve(items), resolve)
	case rt.Kind() == reflect.Map:
		ap, ok := s["additionalProperties"].(map[string]any)
		if !ok {
			t.Errorf("%s: map without an additionalProperties schema", where)
			return
		}
		compareValue(t, where+"{}", rt.Elem(), resolve(ap), resolve)
	}
}

// schemaTypes returns the JSON types a schema allows: its "type", or the
// types of its "enum" values.
func schemaTypes(s map[string]any) []string {
	switch v := s["type"].(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, x.(string))
		}
		return out
	}
	var out []string
	for _, e := range s["enum"].([]any) {
		var typ string
		switch e.(type) {
		case string:
			typ = "string"
		case float64:
			typ = "number"
		case bool:
			typ = "boolean"
		default:
			typ = fmt.Sprintf("%T", e)
		}
		if !slices.Contains(out, typ) {
			out = append(out, typ)
		}
	}
	return out
}

// --- positive cases ------------------------------------------------------

// TestFullSamplesSetEveryField keeps the full samples full: no field, nested
// or not, is left at its zero value.
func TestFullSamplesSetEveryField(t *testing.T) {
	for _, sample := range fullSamples {
		var zero []string
		findZero(reflect.ValueOf(sample), string(sample.EventType()), &zero)
		if len(zero) > 0 {
			t.Errorf("full sample of %s leaves fields unset: %v", sample.EventType(), zero)
		}
	}
}

func findZero(v reflect.Value, path string, out *[]string) {
	if v.Type() == timeType {
		if v.IsZero() {
			*out = append(*out, path)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			*out = append(*out, path)
			return
		}
		if v.Elem().Kind() == reflect.Struct {
			findZero(v.Elem(), path, out)
		} // a pointer to a zero scalar is written, so it counts as set
	case reflect.Struct:
		for i := range v.NumField() {
			findZero(v.Field(i), path+"."+v.Type().Field(i).Name, out)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			*out = append(*out, path)
		}
		if v.Type() == rawType {
			return
		}
		for i := range v.Len() {
			findZero(v.Index(i), path+"["+strconv.Itoa(i)+"]", out)
		}
	case reflect.Map:
		if v.Len() == 0 {
			*out = append(*out, path)
		}
	default:
		if v.IsZero() {
			*out = append(*out, path)
		}
	}
}

func TestSamplesCoverEveryType(t *testing.T) {
	for name, samples := range map[string][]events.Data{"full": fullSamples, "minimal": minimalSamples} {
		var got []events.Type
		for _, d := range samples {
			got = append(got, d.EventType())
		}
		slices.Sort(got)
		if want := events.Types(); !slices.Equal(got, want) {
			t.Errorf("%s samples cover %v, want each of %v once", name, got, want)
		}
	}
}

func TestValidSamples(t *testing.T) {
	type tc struct {
		name string
		typ  events.Type
		data []byte
	}
	var cases []tc
	for _, d := range fullSamples {
		cases = append(cases, tc{"full/" + string(d.EventType()), d.EventType(), marshal(t, d)})
	}
	for _, d := range minimalSamples {
		cases = append(cases, tc{"minimal/" + string(d.EventType()), d.EventType(), marshal(t, d)})
	}
	// Zero values nested in optional parts, as encoding/json writes them.
	cases = append(cases,
		tc{"nil podSpec writes null", events.TypeSlotDeclared, marshal(t, events.SlotDeclared{Ref: minRef, Spec: events.SlotSpec{Startup: &events.JobSpec{}}})},
		tc{"empty readinessTaints", events.TypeGroupDeclared, marshal(t, events.GroupDeclared{Ref: minRef, Spec: events.GroupSpec{Scaler: events.ScalerBuiltin, ReadinessTaints: []events.Taint{}}})},
		tc{"empty nested specs", events.TypeGroupChanged, marshal(t, events.GroupChanged{Ref: minRef, Spec: events.GroupSpec{
			Scaler: events.ScalerBuiltin, Template: &events.NodeTemplate{Pricing: &events.Pricing{}},
			Autoscaling: &events.AutoscalingOptions{}, Builtin: &events.BuiltinScaler{},
		}})},
		tc{"zero times", events.TypeShutdownAttemptLimitReached, marshal(t, events.ShutdownAttemptLimitReached{Ref: minRef, Attempts: 1})},
		tc{"time with offset", events.TypeShutdownAttemptLimitReached, marshal(t, events.ShutdownAttemptLimitReached{Ref: minRef, Attempts: 1, PausedUntil: at.In(time.FixedZone("CET", 3600))})},
		tc{"negative delta", events.TypeScaleDownRequested, marshal(t, events.ScaleDownRequested{Ref: minRef, Request: events.Request{Call: events.CallDecreaseTargetSize, Delta: -3, Group: "workers"}})},
	)
	// Every call and scaler of the closed sets.
	for _, call := range []string{events.CallIncreaseSize, events.CallDecreaseTargetSize, events.CallDeleteNodes, events.CallManual, events.CallDeleteClaim, events.CallDecommission, events.CallDecide} {
		cases = append(cases, tc{"call " + call, events.TypeClaimCreated, marshal(t, events.ClaimCreated{Ref: minRef, Request: events.Request{Call: call}})})
	}
	for _, scaler := range []string{events.ScalerClusterAutoscaler, events.ScalerBuiltin} {
		cases = append(cases, tc{"scaler " + scaler, events.TypeGroupDeclared, marshal(t, events.GroupDeclared{Ref: minRef, Spec: events.GroupSpec{Scaler: scaler}})})
	}
	// Additive evolution: a newer writer's fields, at the top and nested.
	cases = append(cases,
		tc{"unknown fields", events.TypeGroupDeclared, patch(t, sampleOf(t, events.TypeGroupDeclared),
			set("/newField", 1.0), set("/spec/newSpecField", "x"), set("/spec/template/newTemplateField", true))},
		tc{"unknown node field", events.TypeNodeObserved, patch(t, sampleOf(t, events.TypeNodeObserved), set("/node/kubeletVersion", "v1.35.4"))},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := schemas.ValidateEvent(string(c.typ), c.data); err != nil {
				t.Errorf("%v\ndata: %s", err, c.data)
			}
		})
	}
}

// TestDurations checks the duration pattern against what Duration writes and
// what time.ParseDuration reads, through the budget of ClaimCreated.
func TestDurations(t *testing.T) {
	valid := []string{"0s", "0", "300ms", "1.5s", "12m10s", "1h0m0s", "5m", "90s", "1h30m", "1.5µs", "1.5μs", "2us", "100ns", "2562047h47m16.854775807s"}
	for _, d := range []time.Duration{0, 1, time.Microsecond + 500, 300 * time.Millisecond, 1500 * time.Millisecond, 12*time.Minute + 10*time.Second, time.Hour, 36*time.Hour + time.Nanosecond} {
		valid = append(valid, dur(d).String())
	}
	invalid := []string{"", "5", "-5m0s", "+5m", "5 m", "1d", "m", "1.5", "1h-5m", " 5m"}
	for _, s := range valid {
		t.Run(s, func(t *testing.T) {
			if _, err := time.ParseDuration(s); err != nil {
				t.Fatalf("bad test case: %v", err)
			}
			if err := schemas.ValidateEvent("ClaimCreated", withBudget(t, s)); err != nil {
				t.Error(err)
			}
		})
	}
	for _, s := range invalid {
		t.Run("invalid "+s, func(t *testing.T) {
			err := schemas.ValidateEvent("ClaimCreated", withBudget(t, s))
			if err == nil || !strings.Contains(err.Error(), "/budget") {
				t.Errorf("budget %q: err = %v, want one naming /budget", s, err)
			}
		})
	}
}

func withBudget(t *testing.T, budget string) []byte {
	return patch(t, sampleOf(t, events.TypeClaimCreated), set("/budget", budget))
}

// --- negative cases ------------------------------------------------------

func TestInvalidData(t *testing.T) {
	cases := []struct {
		name string
		typ  events.Type
		data []byte
		want []string // substrings of the error, besides the type's name
	}{
		{"attempt as a string", events.TypeClaimCreated,
			patch(t, sampleOf(t, events.TypeClaimCreated), set("/attempt", "3")),
			[]string{"'/attempt'", "got string, want integer"}},
		{"attempt 0", events.TypeClaimBooting,
			patch(t, sampleOf(t, events.TypeClaimBooting), set("/attempt", 0.0)),
			[]string{"'/attempt'", "minimum"}},
		{"attempt fractional", events.TypeClaimReady,
			patch(t, sampleOf(t, events.TypeClaimReady), set("/attempt", 1.5)),
			[]string{"'/attempt'", "want integer"}},
		{"duration as an integer", events.TypeClaimCreated,
			patch(t, sampleOf(t, events.TypeClaimCreated), set("/ttl", 3600000000000.0)),
			[]string{"'/ttl'", "want string"}},
		{"nested duration as an integer", events.TypeGroupDeclared,
			patch(t, sampleOf(t, events.TypeGroupDeclared), set("/spec/lifecycle/readinessGate", 240.0)),
			[]string{"'/spec/lifecycle/readinessGate'", "want string"}},
		{"negative duration", events.TypeGroupChanged,
			patch(t, sampleOf(t, events.TypeGroupChanged), set("/spec/builtin/hold", "-5m0s")),
			[]string{"'/spec/builtin/hold'", "does not match pattern"}},
		{"taint effect Sometimes", events.TypeGroupDeclared,
			patch(t, sampleOf(t, events.TypeGroupDeclared), set("/spec/readinessTaints/1/effect", "Sometimes")),
			[]string{"'/spec/readinessTaints/1/effect'", "must be one of 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"}},
		{"node taint effect Sometimes", events.TypeNodeObserved,
			patch(t, sampleOf(t, events.TypeNodeObserved), set("/node/taints/0/effect", "Sometimes")),
			[]string{"'/node/taints/0/effect'", "must be one of"}},
		{"taint without key", events.TypeSlotDeclared,
			patch(t, sampleOf(t, events.TypeSlotDeclared), del("/spec/taints/0/key")),
			[]string{"'/spec/taints/0'", "missing property 'key'"}},
		{"ClaimFailed without reason", events.TypeClaimFailed,
			patch(t, sampleOf(t, events.TypeClaimFailed), del("/reason")),
			[]string{"missing property 'reason'"}},
		{"without group", events.TypeGroupRetired,
			patch(t, sampleOf(t, events.TypeGroupRetired), del("/group")),
			[]string{"missing property 'group'"}},
		{"empty cause", events.TypeClaimCollected,
			patch(t, sampleOf(t, events.TypeClaimCollected), set("/cause", "")),
			[]string{"'/cause'", "minLength"}},
		{"NodeState without ready", events.TypeNodeObserved,
			patch(t, sampleOf(t, events.TypeNodeObserved), del("/node/ready")),
			[]string{"'/node'", "missing property 'ready'"}},
		{"unknown call", events.TypeScaleDownRequested,
			patch(t, sampleOf(t, events.TypeScaleDownRequested), set("/request/call", "Bogus")),
			[]string{"'/request/call'", "must be one of 'IncreaseSize'"}},
		{"empty call", events.TypeClaimCreated,
			patch(t, sampleOf(t, events.TypeClaimCreated), set("/request/call", "")),
			[]string{"'/request/call'"}},
		{"unknown scaler", events.TypeGroupDeclared,
			patch(t, sampleOf(t, events.TypeGroupDeclared), set("/spec/scaler", "karpenter")),
			[]string{"'/spec/scaler'", "must be one of 'cluster-autoscaler', 'builtin'"}},
		{"time not RFC 3339", events.TypeClaimCreated,
			patch(t, sampleOf(t, events.TypeClaimCreated), set("/deadlineAt", "tomorrow")),
			[]string{"'/deadlineAt'", "date-time"}},
		{"podSpec as a string", events.TypeSlotChanged,
			patch(t, sampleOf(t, events.TypeSlotChanged), set("/spec/startup/podSpec", "busybox")),
			[]string{"'/spec/startup/podSpec'", "want null or object"}},
		{"capacity as a number", events.TypeSlotChanged,
			patch(t, sampleOf(t, events.TypeSlotChanged), set("/spec/capacity/cpu", 8.0)),
			[]string{"'/spec/capacity/cpu'", "want string"}},
		{"forceShutdown as a string", events.TypeClaimFailed,
			patch(t, sampleOf(t, events.TypeClaimFailed), set("/forceShutdown", "true")),
			[]string{"'/forceShutdown'", "want boolean"}},
		{"two failures", events.TypeClaimFailed,
			patch(t, sampleOf(t, events.TypeClaimFailed), del("/reason"), set("/attempt", "3")),
			[]string{"missing property 'reason'", "'/attempt'"}},
		{"data not an object", events.TypeClaimReady, []byte(`["worker-1"]`),
			[]string{"want object"}},
		{"data not JSON", events.TypeClaimReady, []byte(`{"group":`),
			[]string{"not JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := schemas.ValidateEvent(string(c.typ), c.data)
			if err == nil {
				t.Fatalf("no error for %s", c.data)
			}
			for _, w := range append([]string{string(c.typ)}, c.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	err := schemas.ValidateEvent("ClaimExploded", []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), `"ClaimExploded"`) {
		t.Errorf("unknown type: err = %v, want one naming ClaimExploded", err)
	}
	for _, notType := range []string{"defs", "", "../pool.schema", "events/ClaimReady"} {
		if err := schemas.ValidateEvent(notType, []byte(`{}`)); err == nil {
			t.Errorf("ValidateEvent(%q) = nil, want an unknown type", notType)
		}
	}

	err = schemas.ValidateEvent("ClaimCreated", patch(t, sampleOf(t, events.TypeClaimCreated), set("/attempt", "3")))
	const want = "schemas: invalid ClaimCreated data: at '/attempt': got string, want integer"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) || strings.Join(ve.InstanceLocation, "/") != "" {
		t.Errorf("err does not wrap the root *jsonschema.ValidationError: %#v", err)
	}
}

func TestConcurrentValidation(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		for _, d := range fullSamples {
			wg.Go(func() {
				if err := schemas.ValidateEvent(string(d.EventType()), marshal(t, d)); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
}

// TestPoolSchemaEmbedded checks that the pool file's schema, kept by the
// pool handler, is embedded too.
func TestPoolSchemaEmbedded(t *testing.T) {
	if s := readJSON(t, "pool.schema.json"); s["$id"] == nil {
		t.Error("pool.schema.json has no $id")
	}
}

// --- JSON patching -------------------------------------------------------

type edit struct {
	pointer string
	value   any
	delete  bool
}

func set(pointer string, value any) edit { return edit{pointer: pointer, value: value} }
func del(pointer string) edit            { return edit{pointer: pointer, delete: true} }

// patch marshals v and applies the edits, each at a JSON pointer whose
// parent exists.
func patch(t *testing.T, v any, edits ...edit) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal(marshal(t, v), &doc); err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		toks := strings.Split(strings.TrimPrefix(e.pointer, "/"), "/")
		parent := doc
		for _, tok := range toks[:len(toks)-1] {
			parent = child(t, parent, tok, e.pointer)
		}
		last := toks[len(toks)-1]
		switch p := parent.(type) {
		case map[string]any:
			if e.delete {
				if _, ok := p[last]; !ok {
					t.Fatalf("patch %s: nothing to delete", e.pointer)
				}
				delete(p, last)
			} else {
				p[last] = e.value
			}
		case []any:
			i, err := strconv.Atoi(last)
			if err != nil || i >= len(p) || e.delete {
				t.Fatalf("patch %s: bad array edit", e.pointer)
			}
			p[i] = e.value
		default:
			t.Fatalf("patch %s: parent is %T", e.pointer, parent)
		}
	}
	return marshal(t, doc)
}

func child(t *testing.T, v any, tok, pointer string) any {
	t.Helper()
	switch p := v.(type) {
	case map[string]any:
		if c, ok := p[tok]; ok {
			return c
		}
	case []any:
		if i, err := strconv.Atoi(tok); err == nil && i < len(p) {
			return p[i]
		}
	}
	t.Fatalf("patch %s: no %q in %T", pointer, tok, v)
	return nil
}
