package handlers_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/claimstream/claimstream/handlers"
)

func TestParseJobReport(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      handlers.JobReport
		err       string
	}{
		{"no report", "  \n", handlers.JobReport{}, ""},
		{"key=value", "instance-id=i-0abc\nnode = ip-10-0-3-7\nprovider_id=aws:///eu-west-1a/i-0abc\naddress=10.0.3.7\n",
			handlers.JobReport{InstanceID: "i-0abc", Node: "ip-10-0-3-7", ProviderID: "aws:///eu-west-1a/i-0abc", Address: "10.0.3.7"}, ""},
		{"JSON", `{"instanceID":"i-1","node":"ip-1","providerID":"aws:///z/i-1","extra":true}`,
			handlers.JobReport{InstanceID: "i-1", Node: "ip-1", ProviderID: "aws:///z/i-1"}, ""},
		{"JSON of the wrong type", `{"instanceID": 42}`, handlers.JobReport{}, "JSON report"},
		{"truncated JSON", `{"instanceID": "i-1"`, handlers.JobReport{}, "JSON report"},
		{"text after the JSON", `{"instanceID": "i-1"} and more`, handlers.JobReport{}, "text after the object"},
		{"a line that is no key=value", "booted the instance\ninstance-id=i-1", handlers.JobReport{}, `line 1 "booted the instance" is not key=value`},
		{"no instance id", "node=ip-1", handlers.JobReport{}, "names no instance id"},
		{"a node name Kubernetes refuses", "instance-id=i-1\nnode=IP_10", handlers.JobReport{}, `node "IP_10" is not a valid Node name`},
		{"a providerID with a space", "instance-id=i-1\nprovider-id=aws:// x", handlers.JobReport{}, "providerID"},
		{"too long", "instance-id=" + strings.Repeat("x", 5000), handlers.JobReport{}, "more than 4096"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := handlers.ParseJobReport(tc.msg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				if got != (handlers.JobReport{}) {
					t.Fatalf("a bad report gave %+v", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// FuzzParseJobReport: whatever a Job leaves in its termination message,
// the parser returns a report it vouches for, or an error and nothing.
func FuzzParseJobReport(f *testing.F) {
	for _, s := range []string{"", "instance-id=i-1\nnode=ip-1", `{"instanceID":"i-1","node":"n"}`, `{"instanceID":1}`, "x", "=\n=", "{", "node=\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		rep, err := handlers.ParseJobReport(msg)
		if err != nil {
			if rep != (handlers.JobReport{}) {
				t.Fatalf("error %v with report %+v", err, rep)
			}
			return
		}
		if rep == (handlers.JobReport{}) {
			if strings.TrimSpace(msg) != "" {
				t.Fatalf("%q read as no report", msg)
			}
			return
		}
		if rep.InstanceID == "" {
			t.Fatalf("report without instance id: %+v", rep)
		}
		if rep.Node != "" && len(validation.IsDNS1123Subdomain(rep.Node)) > 0 {
			t.Fatalf("invalid node name accepted: %q", rep.Node)
		}
		for _, v := range []string{rep.InstanceID, rep.ProviderID, rep.Address} {
			if strings.ContainsAny(v, " \t\r\n\x00") {
				t.Fatalf("field with spaces accepted: %q", v)
			}
		}
	})
}
