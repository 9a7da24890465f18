package provider

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/claimstream/claimstream/events"
	"github.com/claimstream/claimstream/projections"
	pb "github.com/claimstream/claimstream/provider/externalgrpcpb"
)

// cluster-autoscaler's own defaults, used when the caller sends none.
const (
	caScaleDownUtilizationThreshold    = 0.5
	caScaleDownGpuUtilizationThreshold = 0.5
	caScaleDownUnneededTime            = 10 * time.Minute
	caScaleDownUnreadyTime             = 20 * time.Minute
)

// duration reads one duration of either layout: the google Duration (CA >=
// 1.35) if set, else the meta.v1.Duration (CA <= 1.34). ok is false when
// neither is set.
func duration(d *durationpb.Duration, legacy *pb.LegacyDuration) (time.Duration, bool) {
	if d != nil {
		return d.AsDuration(), true
	}
	if legacy != nil {
		return time.Duration(legacy.GetDuration()), true
	}
	return 0, false
}

// groupOptions is the reply to NodeGroupGetOptions. cluster-autoscaler
// replaces its options wholesale with the reply, so every field the group
// does not override echoes the defaults; durations are sent in both
// encodings (CA <= 1.34 dereferences 3/4/5 with no nil check), and the
// provision time is never zero (kubernetes/autoscaler#5935).
func groupOptions(spec events.GroupSpec, def *pb.NodeGroupAutoscalingOptions) *pb.NodeGroupAutoscalingOptions {
	util, gpuUtil := caScaleDownUtilizationThreshold, caScaleDownGpuUtilizationThreshold
	var zeroOrMax, ignoreDS bool
	if def != nil {
		util, gpuUtil = def.GetScaleDownUtilizationThreshold(), def.GetScaleDownGpuUtilizationThreshold()
		zeroOrMax, ignoreDS = def.GetZeroOrMaxNodeScaling(), def.GetIgnoreDaemonSetsUtilization()
	}
	unneeded, ok := duration(def.GetScaleDownUnneededDuration(), def.GetScaleDownUnneededTime())
	if !ok {
		unneeded = caScaleDownUnneededTime
	}
	unready, ok := duration(def.GetScaleDownUnreadyDuration(), def.GetScaleDownUnreadyTime())
	if !ok {
		unready = caScaleDownUnreadyTime
	}
	boot := projections.BootWindow(spec)
	provision := boot
	if spec.MaxNodeProvisionTime <= 0 {
		if d, ok := duration(def.GetMaxNodeProvisionDuration(), def.GetMaxNodeProvisionTime()); ok && d > 0 {
			provision = d
		}
	}

	if a := spec.Autoscaling; a != nil {
		if a.ScaleDownUtilizationThreshold != nil {
			util = *a.ScaleDownUtilizationThreshold
		}
		if a.ScaleDownGpuUtilizationThreshold != nil {
			gpuUtil = *a.ScaleDownGpuUtilizationThreshold
		}
		if a.ScaleDownUnneededTime != nil {
			unneeded = a.ScaleDownUnneededTime.D()
		}
		if a.ScaleDownUnreadyTime != nil {
			unready = a.ScaleDownUnreadyTime.D()
		}
		if a.ZeroOrMaxNodeScaling != nil {
			zeroOrMax = *a.ZeroOrMaxNodeScaling
		}
		if a.IgnoreDaemonSetsUtilization != nil {
			ignoreDS = *a.IgnoreDaemonSetsUtilization
		}
	}
	return &pb.NodeGroupAutoscalingOptions{
		ScaleDownUtilizationThreshold:    util,
		ScaleDownGpuUtilizationThreshold: gpuUtil,
		ZeroOrMaxNodeScaling:             zeroOrMax,
		IgnoreDaemonSetsUtilization:      ignoreDS,
		ScaleDownUnneededTime:            &pb.LegacyDuration{Duration: int64(unneeded)},
		ScaleDownUnreadyTime:             &pb.LegacyDuration{Duration: int64(unready)},
		MaxNodeProvisionTime:             &pb.LegacyDuration{Duration: int64(provision)},
		ScaleDownUnneededDuration:        durationpb.New(unneeded),
		ScaleDownUnreadyDuration:         durationpb.New(unready),
		MaxNodeProvisionDuration:         durationpb.New(provision),
	}
}

// window reads a pricing window of either layout: google Timestamps (CA >=
// 1.35) or meta.v1.Time (CA <= 1.34).
func window(start, end *timestamppb.Timestamp, oldStart, oldEnd *pb.LegacyTime) (time.Time, time.Time, error) {
	s, ok := timestamp(start, oldStart)
	if !ok {
		return time.Time{}, time.Time{}, status.Error(codes.InvalidArgument, "startTimestamp: required")
	}
	e, ok := timestamp(end, oldEnd)
	if !ok {
		return time.Time{}, time.Time{}, status.Error(codes.InvalidArgument, "endTimestamp: required")
	}
	if e.Before(s) {
		return time.Time{}, time.Time{}, status.Errorf(codes.InvalidArgument, "endTimestamp: %s is before startTimestamp %s", e.Format(time.RFC3339), s.Format(time.RFC3339))
	}
	return s, e, nil
}

func timestamp(t *timestamppb.Timestamp, legacy *pb.LegacyTime) (time.Time, bool) {
	if t != nil {
		return t.AsTime(), true
	}
	if legacy != nil {
		return time.Unix(legacy.GetSeconds(), int64(legacy.GetNanos())).UTC(), true
	}
	return time.Time{}, false
}
