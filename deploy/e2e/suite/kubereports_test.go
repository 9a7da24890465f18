package suite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// A claim driven to ready on a kwok Node: `kubectl get events
// --field-selector involvedObject.name=<node>` finds its ClaimReady, the
// boot is recorded on its startup Job, and the claimstream-status
// ConfigMap shows the group's claim. Scaled down again at the end, so the
// suite's other scenarios find the group as they left it.
func TestKubernetesEventsAndStatusConfigMap(t *testing.T) {
	dumpOnFailure(t)
	grantReportingRBAC(t)
	before := instances(t, "boot")
	if len(before) >= 2 {
		t.Skipf("both boot slots are taken: %s", describeInstances(before))
	}
	increaseSize(t, "boot", 1)
	var slot string
	waitT(t, 90*time.Second, "the new claim's instance running", func() (bool, string) {
		ins := instances(t, "boot")
		for id, in := range ins {
			if before[id] == nil && in.GetStatus().GetInstanceState() == pb.InstanceStatus_instanceRunning {
				slot = strings.TrimPrefix(id, "homelab://")
				return true, ""
			}
		}
		return false, describeInstances(ins)
	})
	startup := jobs(t, map[string]string{lOp: "startup", lSlot: slot})
	job := startup[len(startup)-1].Name
	claim := startup[len(startup)-1].Labels[lClaim]

	// kubectl get events --field-selector involvedObject.name=<node>
	// (Node Events live in the default namespace; kubectl -A finds them).
	ready := waitKubeEvent(t, "", slot, "ClaimReady", claim)
	if ready.Type != corev1.EventTypeNormal || ready.InvolvedObject.Kind != "Node" || !strings.Contains(ready.Message, claim) || !strings.Contains(ready.Message, "after it was requested") {
		t.Errorf("ClaimReady: %s %s/%s %q", ready.Type, ready.InvolvedObject.Kind, ready.InvolvedObject.Name, ready.Message)
	}
	if ready.ReportingController != "claimstream.dev/claimstream" {
		t.Errorf("reportingController %q", ready.ReportingController)
	}
	booting := waitKubeEvent(t, namespace, job, "ClaimBooting", claim)
	if booting.InvolvedObject.Kind != "Job" || !strings.Contains(booting.Message, "startup Job "+job) {
		t.Errorf("ClaimBooting: %s/%s %q", booting.InvolvedObject.Kind, booting.InvolvedObject.Name, booting.Message)
	}

	// The status ConfigMap: the group with its ready claim, the leader,
	// the log's sequence.
	var st struct {
		Leader string `json:"leader"`
		Seq    uint64 `json:"seq"`
		Groups []struct {
			Name   string         `json:"name"`
			Target int            `json:"target"`
			Live   int            `json:"live"`
			Max    int            `json:"max"`
			Slots  map[string]int `json:"slots"`
		} `json:"groups"`
	}
	want := len(before) + 1
	waitT(t, 60*time.Second, "the status ConfigMap shows the claim", func() (bool, string) {
		cm, err := admin.CoreV1().ConfigMaps(namespace).Get(context.Background(), "claimstream-status", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if err := yaml.Unmarshal([]byte(cm.Data["status"]), &st); err != nil {
			t.Fatalf("status: %v\n%s", err, cm.Data["status"])
		}
		for _, g := range st.Groups {
			if g.Name == "boot" {
				return g.Target == want && g.Live == want && g.Max == 2 && g.Slots["ready"] == want && st.Leader != "" && st.Seq > 0, cm.Data["status"]
			}
		}
		return false, cm.Data["status"]
	})

	// Back to where the group was; the scale-down is on the Node too.
	w := watchNode(t, slot)
	if _, err := provider.NodeGroupDeleteNodes(ctxFor(t, 10*time.Second), &pb.NodeGroupDeleteNodesRequest{
		Id: "boot", Nodes: []*pb.ExternalGrpcNode{{ProviderID: providerID(slot), Name: slot}},
	}); err != nil {
		t.Fatalf("DeleteNodes: %v", err)
	}
	waitKubeEvent(t, "", slot, "ScaleDownRequested", claim)
	waitChan(t, w.deleted, 90*time.Second, "the powered-off Node "+slot+" deleted")
	waitT(t, 30*time.Second, "the claim completed", func() (bool, string) {
		ins := instances(t, "boot")
		return ins[providerID(slot)] == nil, describeInstances(ins)
	})
}

// waitKubeEvent lists the core/v1 Events of ns ("" for all) whose
// involvedObject is name, as `kubectl get events --field-selector
// involvedObject.name=<name>` does, until one has reason and a note that
// names about (the claim; "" for any: a Node keeps the Events of its
// earlier claims).
func waitKubeEvent(t *testing.T, ns, name, reason, about string) corev1.Event {
	t.Helper()
	var found corev1.Event
	waitT(t, 60*time.Second, fmt.Sprintf("a %s Event on %s", reason, name), func() (bool, string) {
		l, err := admin.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range l.Items {
			if e.Reason == reason && strings.Contains(e.Message, about) {
				found = e
				return true, ""
			}
			seen = append(seen, e.Reason)
		}
		return false, strings.Join(seen, ",")
	})
	return found
}

// grantReportingRBAC gives the server's ServiceAccount what the Events and
// the status ConfigMap need, when the chart does not grant it: events.k8s.io
// events create/patch anywhere (a Node's Events live in "default"), and
// configmaps get/create/update in the namespace.
func grantReportingRBAC(t *testing.T) {
	t.Helper()
	if serverUser == "e2e-admin" {
		return
	}
	ctx := ctxFor(t, 30*time.Second)
	allowed := func(ra authorizationv1.ResourceAttributes) bool {
		r, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: serverUser, Groups: []string{"system:serviceaccounts", "system:authenticated"}, ResourceAttributes: &ra}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	needs := []authorizationv1.ResourceAttributes{
		{Group: "events.k8s.io", Resource: "events", Verb: "create", Namespace: "default"},
		{Group: "events.k8s.io", Resource: "events", Verb: "patch", Namespace: namespace},
		{Resource: "configmaps", Verb: "create", Namespace: namespace},
		{Resource: "configmaps", Verb: "update", Namespace: namespace, Name: "claimstream-status"},
	}
	missing := false
	for _, ra := range needs {
		missing = missing || !allowed(ra)
	}
	if !missing {
		return
	}
	t.Logf("the chart's RBAC does not let %s record Events and write the status ConfigMap: the test grants it", serverUser)
	sa := strings.Split(serverUser, ":")
	subject := rbacv1.Subject{Kind: "ServiceAccount", Namespace: sa[2], Name: sa[3]}
	create := func(err error) {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-claimstream-events"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}}, metav1.CreateOptions{})
	create(err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-claimstream-events"},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "e2e-claimstream-events"}, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{})
	create(err)
	_, err = admin.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "e2e-claimstream-status"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"claimstream-status"}, Verbs: []string{"get", "update"}},
		}}, metav1.CreateOptions{})
	create(err)
	_, err = admin.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-claimstream-status", Namespace: namespace},
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "e2e-claimstream-status"}, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{})
	create(err)
	waitT(t, 30*time.Second, "the grant in force", func() (bool, string) {
		for _, ra := range needs {
			if !allowed(ra) {
				return false, ra.Verb + " " + ra.Resource
			}
		}
		return true, ""
	})
}
